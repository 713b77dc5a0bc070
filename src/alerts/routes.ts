// The admin module of alert rules: the JSON API /api/alerts (list, create, get, update, delete, enable/disable, history, dry run, secret rotation) under alerts:read / alerts:write, every change in the admin audit.
import { z } from 'zod';
import type { Kysely } from 'kysely';
import type { FastifyRequest } from 'fastify';
import { requirePermission } from '../admin/auth/principal.js';
import type { AdminModule } from '../admin/module.js';
import { intId } from '../admin/api/route.js';
import { audit, notFound } from '../admin/api/shared.js';
import { validationError, type ValidationErrorItem } from '../http/validation.js';
import { getIdentityById } from '../store/repos/identities.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import type { Services } from '../runtime/services.js';
import { dryRun } from './dry-run.js';
import { registerAlertPages } from './pages.js';
import { apiCreateSchema, deleteRule, dryRunSchema, getRule, insertRule, listEvents, listRules, publicRule, ruleProblems, ruleResponse, updateRule, updateSchema, type RuleFields } from './rules.js';
import { generateWebhookSecret, WebhookSecretBox } from './secret.js';
import type { AlertRule, AlertsDatabase } from './schema.js';

const idParams = z.strictObject({ id: intId });
const historyQuery = z.strictObject({ limit: z.coerce.number().int().min(1).max(500).default(100) });

const eventResponse = z.object({
  id: z.number().int(),
  rule_id: z.number().int(),
  ts: z.string(),
  kind: z.enum(['firing', 'resolved', 'repeat']),
  value: z.number(),
  threshold: z.number(),
  details: z.record(z.string(), z.unknown()),
  notified: z.boolean(),
  delivery_status: z.enum(['none', 'pending', 'delivered', 'failed']),
  delivery_error: z.string().nullable(),
  delivered_at: z.string().nullable(),
});

export const alertsDb = (services: Pick<Services, 'db'>): Kysely<AlertsDatabase> => services.db as unknown as Kysely<AlertsDatabase>;

/** identity_id and source_id scope a rule to records that exist (422 otherwise, like any dangling reference). */
export async function referenceProblems(services: Services, r: Pick<RuleFields, 'identity_id' | 'source_id'>, where: 'body' = 'body'): Promise<ValidationErrorItem[]> {
  const items: ValidationErrorItem[] = [];
  if (r.identity_id !== null && !(await getIdentityById(services.db, r.identity_id))) items.push({ loc: [where, 'identity_id'], msg: 'identity_id refers to an identity that does not exist', type: 'value_error.reference' });
  if (r.source_id !== null && !(await getDataSourceBySourceId(services.db, r.source_id))) items.push({ loc: [where, 'source_id'], msg: 'source_id refers to a data source that does not exist', type: 'value_error.reference' });
  return items;
}

/** Rule changes shared by the JSON API and the console forms: validation against the store, the write, the audit. */
export function alertActions(services: Services) {
  const db = alertsDb(services);
  const box = new WebhookSecretBox(services.secrets.get('approvals.encryption_key_ref'));
  const load = async (id: number): Promise<AlertRule> => {
    const row = await getRule(db, id);
    if (!row) throw notFound('alert rule');
    return row;
  };
  const conflictName = async (name: string, self: number | null) => {
    const same = (await listRules(db)).find((r) => r.name === name && r.id !== self);
    if (same) throw validationError([{ loc: ['body', 'name'], msg: 'an alert rule with this name already exists', type: 'value_error.unique' }]);
  };
  return {
    db,
    load,
    /** Creates a rule; a webhook rule's secret is returned here once and never again. */
    async create(req: FastifyRequest, body: RuleFields & { enabled: boolean }): Promise<{ row: AlertRule; secret: string | null }> {
      const problems = await referenceProblems(services, body);
      if (problems.length > 0) throw validationError(problems);
      await conflictName(body.name, null);
      const secret = body.notification_channel === 'webhook' ? generateWebhookSecret() : null;
      const row = await insertRule(db, { ...body, webhook_secret: secret === null ? null : box.seal(secret) });
      await audit(services, req, 'alert.create', { type: 'alert_rule', id: row.id }, { after: publicRule(row) }, 201);
      return { row, secret };
    },
    /** Updates a rule from a partial body (null clears the scopes); a rule that becomes a webhook rule gets a secret, returned once. */
    async update(req: FastifyRequest, id: number, body: z.output<typeof updateSchema>): Promise<{ row: AlertRule; secret: string | null }> {
      const before = await load(id);
      const merged: RuleFields = {
        name: body.name ?? before.name,
        condition_type: body.condition_type ?? before.condition_type,
        threshold: body.threshold ?? before.threshold,
        comparator: body.comparator ?? before.comparator,
        description: body.description ?? before.description,
        identity_id: body.identity_id === undefined ? before.identity_id : body.identity_id,
        notification_channel: body.notification_channel ?? before.notification_channel,
        notification_target: body.notification_target ?? (body.notification_channel && body.notification_channel !== before.notification_channel ? '' : before.notification_target),
        source_id: body.source_id === undefined ? before.source_id : body.source_id,
        window_seconds: body.window_seconds ?? before.window_seconds,
      };
      const items: ValidationErrorItem[] = ruleProblems(merged).map((p) => ({ loc: ['body', p.path], msg: p.message, type: 'value_error' }));
      items.push(...(await referenceProblems(services, merged)));
      if (items.length > 0) throw validationError(items);
      if (merged.name !== before.name) await conflictName(merged.name, before.id);
      const newSecret = merged.notification_channel === 'webhook' && before.webhook_secret === null ? generateWebhookSecret() : null;
      const measuresAnew =
        merged.condition_type !== before.condition_type || merged.identity_id !== before.identity_id || merged.source_id !== before.source_id || merged.window_seconds !== before.window_seconds;
      const row = await updateRule(
        db,
        before.id,
        {
          ...merged,
          ...(body.enabled !== undefined && body.enabled !== null ? { enabled: body.enabled } : {}),
          ...(newSecret !== null ? { webhook_secret: box.seal(newSecret) } : merged.notification_channel !== 'webhook' ? { webhook_secret: null } : {}),
        },
        measuresAnew,
      );
      if (!row) throw notFound('alert rule');
      await audit(services, req, 'alert.update', { type: 'alert_rule', id: row.id }, { before: publicRule(before), after: publicRule(row) });
      return { row, secret: newSecret };
    },
    async setEnabled(req: FastifyRequest, id: number, enabled: boolean): Promise<AlertRule> {
      const before = await load(id);
      const row = await updateRule(db, id, { enabled }, !enabled && before.enabled);
      if (!row) throw notFound('alert rule');
      await audit(services, req, enabled ? 'alert.enable' : 'alert.disable', { type: 'alert_rule', id: row.id }, { before: { enabled: before.enabled }, after: { enabled } });
      return row;
    },
    async remove(req: FastifyRequest, id: number): Promise<void> {
      const before = await load(id);
      if (!(await deleteRule(db, id))) throw notFound('alert rule');
      await audit(services, req, 'alert.delete', { type: 'alert_rule', id }, { before: publicRule(before) });
    },
    async rotate(req: FastifyRequest, id: number): Promise<string> {
      const before = await load(id);
      if (before.notification_channel !== 'webhook') throw validationError([{ loc: ['path', 'id'], msg: 'only a webhook rule has a signing secret', type: 'value_error' }]);
      const secret = generateWebhookSecret();
      await updateRule(db, before.id, { webhook_secret: box.seal(secret) }, false);
      await audit(services, req, 'alert.rotate_secret', { type: 'alert_rule', id: before.id }, { before: { webhook_secret: 'previous secret' }, after: { webhook_secret: 'generated' } });
      return secret;
    },
  };
}

export const alertsModule: AdminModule = (ctx) => {
  const { app, api, services } = ctx;
  const read = requirePermission('alerts:read');
  const write = requirePermission('alerts:write');
  const actions = alertActions(services);
  const { db, load } = actions;
  registerAlertPages(ctx, actions);

  api.route(app, {
    method: 'GET',
    url: '/api/alerts',
    summary: 'List alert rules with their state',
    tags: ['alerts'],
    preHandler: read,
    response: z.array(ruleResponse),
    handler: async () => (await listRules(db)).map(publicRule),
  });

  api.route(app, {
    method: 'POST',
    url: '/api/alerts',
    summary: 'Create an alert rule; a webhook rule answers its signing secret once, as webhook_secret',
    tags: ['alerts'],
    preHandler: write,
    body: apiCreateSchema,
    response: ruleResponse.extend({ webhook_secret: z.string().optional() }),
    successStatus: 201,
    handler: async ({ body, req }) => {
      const { row, secret } = await actions.create(req, body);
      const out = publicRule(row);
      return secret === null ? out : { ...out, webhook_secret: secret };
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/api/alerts/dry-run',
    summary: 'Evaluate an unsaved rule now: measured value, would it fire, 24 h sparkline; stores and sends nothing',
    tags: ['alerts'],
    preHandler: read,
    body: dryRunSchema(false),
    handler: async ({ body }) => {
      const problems = await referenceProblems(services, body);
      if (problems.length > 0) throw validationError(problems);
      return dryRun(db, body, Date.now());
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/alerts/:id',
    summary: 'Get an alert rule',
    tags: ['alerts'],
    preHandler: read,
    params: idParams,
    response: ruleResponse,
    handler: async ({ params }) => publicRule(await load(params.id)),
  });

  api.route(app, {
    method: 'PATCH',
    url: '/api/alerts/:id',
    summary: 'Update an alert rule (a changed condition, scope or window starts it again from ok); switching to webhook answers a new secret once',
    tags: ['alerts'],
    preHandler: write,
    params: idParams,
    body: updateSchema,
    response: ruleResponse.extend({ webhook_secret: z.string().optional() }),
    handler: async ({ params, body, req }) => {
      const { row, secret } = await actions.update(req, params.id, body);
      const out = publicRule(row);
      return secret === null ? out : { ...out, webhook_secret: secret };
    },
  });

  api.route(app, {
    method: 'DELETE',
    url: '/api/alerts/:id',
    summary: 'Delete an alert rule and its history',
    tags: ['alerts'],
    preHandler: write,
    params: idParams,
    response: z.object({ deleted: z.boolean(), id: z.number().int() }),
    handler: async ({ params, req }) => {
      await actions.remove(req, params.id);
      return { deleted: true, id: params.id };
    },
  });

  for (const enabled of [true, false]) {
    api.route(app, {
      method: 'POST',
      url: `/api/alerts/:id/${enabled ? 'enable' : 'disable'}`,
      summary: enabled ? 'Enable an alert rule' : 'Disable an alert rule (it is no longer evaluated; its state starts again from ok)',
      tags: ['alerts'],
      preHandler: write,
      params: idParams,
      response: ruleResponse,
      handler: async ({ params, req }) => publicRule(await actions.setEnabled(req, params.id, enabled)),
    });
  }

  api.route(app, {
    method: 'POST',
    url: '/api/alerts/:id/rotate-secret',
    summary: 'Replace a webhook rule\'s signing secret with a new one, shown once',
    tags: ['alerts'],
    preHandler: write,
    params: idParams,
    response: z.object({ webhook_secret: z.string() }),
    handler: async ({ params, req }) => ({ webhook_secret: await actions.rotate(req, params.id) }),
  });

  api.route(app, {
    method: 'GET',
    url: '/api/alerts/:id/history',
    summary: 'Firings, resolutions and repeats of an alert rule, newest first, with their delivery outcome',
    tags: ['alerts'],
    preHandler: read,
    params: idParams,
    query: historyQuery,
    response: z.array(eventResponse),
    handler: async ({ params, query }) => {
      await load(params.id);
      const rows = await listEvents(db, params.id, query.limit);
      return rows.map((e) => ({ ...e, id: Number(e.id), ts: e.ts.toISOString(), delivered_at: e.delivered_at?.toISOString() ?? null, details: e.details as Record<string, unknown> }));
    },
  });
};

export type AlertActions = ReturnType<typeof alertActions>;
