// The policy admin module: /api/policies CRUD, dry-run, import preview/apply, compat preview, and the console form endpoints of spec §4 (pages for browsers, JSON for API clients; pages.tsx).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AdminModule, AdminModuleContext } from '../../admin/module.js';
import { intId, type ApiRegistry } from '../../admin/api/route.js';
import { parseOrThrow, validationError } from '../../http/validation.js';
import type { ValidationErrorItem } from '../../http/validation.js';
import { requirePermission } from '../../admin/auth/principal.js';
import { auditOf } from '../../admin/auth/routes.js';
import { GatehouseError } from '../../errors/registry.js';
import { getPolicyById, listPolicies } from '../../store/repos/policies.js';
import type { PolicyPatch } from '../../store/repos/policies.js';
import type { Db } from '../../store/repos/util.js';
import type { Services } from '../../runtime/services.js';
import { FORM_FIELD_OF, translateLegacyForm } from './compat.js';
import type { FormField } from './compat.js';
import { dryRun, dryRunFormSchema, dryRunFromForm, dryRunSchema } from './dry-run.js';
import type { DryRunDeps } from './dry-run.js';
import { compatPreview, documentFromBody, documentFromText } from './documents.js';
import { DocumentError, planErrors, planImport } from './import.js';
import type { ImportPlan, ParsedDocument } from './import.js';
import { checkPolicyBody, issuesAt, policyCreateSchema, policyUpdateSchema, policyViewSchema, viewPolicy } from './model.js';
import { createSqlClassifier } from './sql.js';
import { applyImportVersioned, createPolicyVersioned, deletePolicyVersioned, updatePolicyVersioned } from './writes.js';
import { catalogPortFor } from '../../catalog/runtime.js';
import { wantsPage } from '../console/context.js';
import { registerPolicyPages, type PolicyFormPages } from './pages.js';
import type { ImportWrite, NewPolicy, PolicyWrite } from './writes.js';

const idParams = z.strictObject({ id: intId });
const formIdParams = z.strictObject({ policy_id: intId });
const YAML_TYPES = ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/x-yaml'];
const formSchema = z.record(z.string(), z.union([z.string(), z.array(z.string())]));

export const policyModule: AdminModule = async (ctx) => {
  // The console pages register on the root instance: the admin error handler finds their form pages there.
  const pages = registerPolicyPages(ctx);
  // A child scope, so the YAML body parser serves only these routes; the guard's root hooks still apply.
  await ctx.app.register(async (scope) => {
    scope.addContentTypeParser(YAML_TYPES, { parseAs: 'string', bodyLimit: 1024 * 1024 }, (_req, body, done) => done(null, body));
    registerPolicyRoutes({ ...ctx, app: scope }, pages);
  });
};

function withDocument<T>(run: () => T): T {
  try {
    return run();
  } catch (err) {
    if (err instanceof DocumentError) throw validationError(err.items);
    throw err;
  }
}

export function registerPolicyRoutes({ app, api, services }: AdminModuleContext, pages: PolicyFormPages): void {
  const { db, adminAudit, policies } = services;
  const dryRunDeps: DryRunDeps = { db, policies: () => policies.current(), classifySql: createSqlClassifier(), catalog: catalogPortFor(services) };
  const read = requirePermission('policies:read');
  const write = requirePermission('policies:write');

  // The write is committed: every instance learns of it first, then the audit records it.
  const afterWrite = async (req: FastifyRequest, action: string, w: PolicyWrite, status: number) => {
    const id = (w.after ?? w.before)?.id ?? 0;
    await policies.announce(w.version);
    await adminAudit.record(auditOf(req, {
      action, outcome: 'success', status, target: { type: 'policy', id },
      changes: { before: w.before ? viewPolicy(w.before) : null, after: w.after ? viewPolicy(w.after) : null },
      details: { policy_version: w.version },
    }));
  };

  api.route(app, {
    method: 'GET', url: '/api/policies', summary: 'List policies in evaluation order (priority desc, id asc)', tags: ['policies'],
    response: z.array(policyViewSchema), preHandler: read,
    handler: async () => (await listPolicies(db)).map(viewPolicy),
  });

  api.route(app, {
    method: 'GET', url: '/api/policies/:id', summary: 'One policy', tags: ['policies'], params: idParams,
    response: policyViewSchema, preHandler: read,
    handler: async ({ params }) => {
      const p = await getPolicyById(db, params.id);
      if (!p) throw new GatehouseError('not_found', 'Policy not found.');
      return viewPolicy(p);
    },
  });

  api.route(app, {
    method: 'POST', url: '/api/policies', summary: 'Create a policy', tags: ['policies'], body: policyCreateSchema,
    response: policyViewSchema, successStatus: 201, preHandler: write,
    handler: async ({ body, req }) => {
      const checked = checkPolicyBody(body.conditions, body.actions);
      if (!checked.ok) throw validationError(issuesAt(['body'], checked.issues));
      const w = await createPolicyVersioned(db, { name: body.name, priority: body.priority, enabled: body.enabled, conditions: checked.conditions, actions: checked.actions });
      await afterWrite(req, 'policy.create', w, 201);
      return viewPolicy(w.after!);
    },
  });

  api.route(app, {
    method: 'PATCH', url: '/api/policies/:id', summary: 'Change a policy (absent or null fields stay as they are)', tags: ['policies'],
    params: idParams, body: policyUpdateSchema, response: policyViewSchema, preHandler: write,
    handler: async ({ params, body, req }) => {
      const patch: PolicyPatch = {};
      if (body.name !== null && body.name !== undefined) patch.name = body.name;
      if (body.priority !== null && body.priority !== undefined) patch.priority = body.priority;
      if (body.enabled !== null && body.enabled !== undefined) patch.enabled = body.enabled;
      if (body.conditions !== null && body.conditions !== undefined) patch.conditions = body.conditions as NewPolicy['conditions'];
      if (body.actions !== null && body.actions !== undefined) patch.actions = body.actions as NewPolicy['actions'];
      const w = await updatePolicyVersioned(db, params.id, patch, (merged) => {
        const checked = checkPolicyBody(merged.conditions, merged.actions);
        if (!checked.ok) throw validationError(issuesAt(['body'], checked.issues));
      });
      await afterWrite(req, 'policy.update', w, 200);
      return viewPolicy(w.after!);
    },
  });

  api.route(app, {
    method: 'DELETE', url: '/api/policies/:id', summary: 'Delete a policy', tags: ['policies'], params: idParams,
    successStatus: 204, preHandler: write,
    handler: async ({ params, req, reply }) => {
      const w = await deletePolicyVersioned(db, params.id);
      await afterWrite(req, 'policy.delete', w, 204);
      return reply.code(204).send();
    },
  });

  api.route(app, {
    method: 'POST', url: '/api/policies/dry-run', summary: 'Decide a described request against the source roles and the policy set in force; changes nothing',
    tags: ['policies'], body: dryRunSchema, preHandler: read,
    handler: async ({ body }) => dryRun(dryRunDeps, body),
  });

  const importBody = z.unknown().describe('{document: string, format?: "json"|"yaml"}, or the document itself: a list of policies or {policies: [...]} (JSON, or YAML with a YAML content type)');

  api.route(app, {
    method: 'POST', url: '/api/policies/import/preview', summary: 'Preview an import: create / update / unchanged / invalid per policy, matched by name',
    tags: ['policies'], body: importBody, preHandler: read,
    handler: async ({ req }) => preview(db, withDocument(() => documentFromBody(req.body, req.headers['content-type']))),
  });

  api.route(app, {
    method: 'POST', url: '/api/policies/import/apply', summary: 'Apply an import atomically: any invalid policy → 422 and nothing changes',
    tags: ['policies'], body: importBody, preHandler: write,
    handler: async ({ req }) => applyImport(services, req, withDocument(() => documentFromBody(req.body, req.headers['content-type']))),
  });

  api.route(app, {
    method: 'POST', url: '/api/policies/import/compat-preview', summary: 'Translate policies in the earlier console form fields (cond_*, action_*, raw_*) and preview them as an import',
    tags: ['policies'], body: importBody, preHandler: read,
    handler: async ({ req }) => {
      const doc = withDocument(() => documentFromBody(req.body, req.headers['content-type'], { allowSingleObject: true }));
      return compatPreview(doc, await listPolicies(db));
    },
  });

  registerFormRoutes(app, services, dryRunDeps, { read, write, afterWrite }, pages);
  describeFormRoutes(api);
}

export async function preview(db: Db, doc: ParsedDocument): Promise<ImportPlan> {
  return planImport(doc, await listPolicies(db));
}

async function applyImport(services: Services, req: FastifyRequest, doc: ParsedDocument) {
  let plan: ImportPlan | null = null;
  const result = await applyImportVersioned(services.db, async (trx) => {
    // Planned again under the version lock, so the stored policies cannot change between plan and write.
    plan = planImport(doc, await listPolicies(trx));
    if (!plan.valid) throw validationError(planErrors(plan));
    return plan.items.flatMap((i): ImportWrite[] => {
      if (i.status === 'create') return [{ kind: 'create', policy: i.policy! }];
      if (i.status === 'update') return [{ kind: 'update', id: i.policy_id!, policy: i.policy! }];
      return [];
    });
  });
  const done = plan as unknown as ImportPlan;
  if (result.created.length + result.updated.length > 0) await services.policies.announce(result.version);
  await services.adminAudit.record(auditOf(req, {
    action: 'policy.import', outcome: 'success', status: 200, target: { type: 'policy_set', id: result.version },
    changes: {
      before: result.updated.map((u) => viewPolicy(u.before)),
      after: [...result.created, ...result.updated.map((u) => u.after)].map(viewPolicy),
    },
    details: { created: result.created.length, updated: result.updated.length, unchanged: done.summary.unchanged, policy_version: result.version },
  }));
  return {
    applied: true,
    summary: done.summary,
    policy_version: result.version,
    items: done.items.map((i) => ({ index: i.index, name: i.name, status: i.status, reasons: i.reasons, changes: i.changes,
      policy_id: i.status === 'create' ? (result.created.find((c) => c.name === i.name)?.id ?? null) : i.policy_id })),
  };
}

interface FormGuards {
  read: ReturnType<typeof requirePermission>;
  write: ReturnType<typeof requirePermission>;
  afterWrite: (req: FastifyRequest, action: string, w: PolicyWrite, status: number) => Promise<void>;
}

/** Builds a policy from the console form, locating every problem on the form field it came from. */
export function policyFromForm(raw: unknown): { policy: NewPolicy; notes: ReturnType<typeof translateLegacyForm>['notes'] } {
  const form = flattenForm(parseOrThrow(formSchema, 'body', raw ?? {}));
  const t = translateLegacyForm(form);
  const items: ValidationErrorItem[] = t.problems.map((p) => ({ loc: ['body', p.field], msg: p.msg, type: 'value_error' }));
  if (t.policy.name === '') items.push({ loc: ['body', 'name'], msg: 'Field required', type: 'missing' });
  else if (t.policy.name.length > 255) items.push({ loc: ['body', 'name'], msg: 'must be at most 255 characters', type: 'value_error.too_big' });
  const checked = checkPolicyBody(t.policy.conditions, t.policy.actions);
  if (!checked.ok) {
    for (const issue of checked.issues) {
      const key = `${String(issue.loc[0])}.${String(issue.loc[1])}`;
      const field: FormField = FORM_FIELD_OF[key] ?? (issue.loc[0] === 'actions' ? 'raw_actions' : 'raw_conditions');
      items.push({ loc: ['body', field], msg: `${issue.loc.join('.')}: ${issue.msg}`, type: issue.type === 'extra_forbidden' ? 'extra_forbidden' : `value_error.${issue.type}` });
    }
  }
  if (items.length > 0 || !checked.ok) throw validationError(items);
  return { policy: { name: t.policy.name, priority: t.policy.priority, enabled: true, conditions: checked.conditions, actions: checked.actions }, notes: t.notes };
}

/** Form parsers give a repeated field as an array; the policy form has single-valued fields only, so the last value wins. */
function flattenForm(form: Record<string, string | string[]>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(form)) out[k] = Array.isArray(v) ? (v[v.length - 1] ?? '') : v;
  return out;
}

function payloadOf(raw: unknown): string {
  const form = flattenForm(parseOrThrow(formSchema, 'body', raw ?? {}));
  return form.policy_payload ?? '';
}

/** The console form endpoints in the OpenAPI document (form-encoded or JSON bodies, spec §2 "Console form bodies"). */
function describeFormRoutes(api: ApiRegistry): void {
  const consumes = ['application/x-www-form-urlencoded', 'application/json'];
  const produces = ['text/html', 'application/json'];
  const payload = z.object({ policy_payload: z.string().default('') });
  const tags = ['policies', 'console'];
  api.describe({ method: 'POST', url: '/dashboard/policies/create', summary: 'Create a policy from the console form fields', tags, body: formSchema, consumes, produces, successStatus: 201 });
  api.describe({ method: 'POST', url: '/dashboard/policies/:policy_id/update', summary: 'Update a policy from the console form fields', tags, params: formIdParams, body: formSchema, consumes, produces });
  api.describe({ method: 'POST', url: '/dashboard/policies/import', summary: 'Preview policies in the earlier console form fields as an import', tags, body: payload, consumes, produces });
  api.describe({ method: 'POST', url: '/dashboard/policies/import/preview', summary: 'Preview a policy import document', tags, body: payload, consumes, produces });
  api.describe({ method: 'POST', url: '/dashboard/policies/import/apply', summary: 'Apply a policy import document', tags, body: payload, consumes, produces });
  api.describe({ method: 'POST', url: '/dashboard/policies/dry-run', summary: 'Dry-run the policy set from the console form fields', tags, body: dryRunFormSchema, consumes, produces });
}

/**
 * Console form endpoints (spec §4, form-encoded). A browser (Accept names text/html) gets a redirect or a page
 * (`pages`); any other caller the JSON bodies of the JSON API, as before the console had these pages
 * (docs/policy-api.md, docs/decisions/0019-console-admin-pages.md).
 */
function registerFormRoutes(app: FastifyInstance, services: Services, dryRunDeps: DryRunDeps, g: FormGuards, pages: PolicyFormPages): void {
  const { db } = services;

  app.post('/dashboard/policies/create', { preHandler: g.write }, async (req, reply) => {
    const { policy, notes } = policyFromForm(req.body);
    const w = await createPolicyVersioned(db, policy);
    await g.afterWrite(req, 'policy.create', w, 201);
    if (wantsPage(req)) return pages.saved(reply, w.after!.id);
    return reply.code(201).send({ policy: viewPolicy(w.after!), notes });
  });

  app.post('/dashboard/policies/:policy_id/update', { preHandler: g.write }, async (req, reply) => {
    const { policy_id } = parseOrThrow(formIdParams, 'path', req.params);
    const { policy, notes } = policyFromForm(req.body);
    // The form carries no enabled field: the stored state is kept.
    const { enabled: _enabled, ...patch } = policy;
    const w = await updatePolicyVersioned(db, policy_id, patch, () => undefined);
    await g.afterWrite(req, 'policy.update', w, 200);
    if (wantsPage(req)) return pages.saved(reply, w.after!.id);
    return { policy: viewPolicy(w.after!), notes };
  });

  app.post('/dashboard/policies/import', { preHandler: g.read }, async (req, reply) => {
    const doc = withDocument(() => documentFromText(payloadOf(req.body), ['body', 'policy_payload'], { allowSingleObject: true }));
    const result = compatPreview(doc, await listPolicies(db));
    return wantsPage(req) ? pages.imported(req, reply, { kind: 'compat', result }) : result;
  });

  app.post('/dashboard/policies/import/preview', { preHandler: g.read }, async (req, reply) => {
    const result = await preview(db, withDocument(() => documentFromText(payloadOf(req.body), ['body', 'policy_payload'])));
    return wantsPage(req) ? pages.imported(req, reply, { kind: 'preview', result }) : result;
  });

  app.post('/dashboard/policies/import/apply', { preHandler: g.write }, async (req, reply) => {
    const result = await applyImport(services, req, withDocument(() => documentFromText(payloadOf(req.body), ['body', 'policy_payload'])));
    return wantsPage(req) ? pages.imported(req, reply, { kind: 'apply', result }) : result;
  });

  app.post('/dashboard/policies/dry-run', { preHandler: g.read }, async (req, reply) => {
    const form = parseOrThrow(dryRunFormSchema, 'body', req.body ?? {});
    const result = await dryRun(dryRunDeps, parseOrThrow(dryRunSchema, 'body', dryRunFromForm(form)));
    return wantsPage(req) ? pages.dryRan(req, reply, result) : result;
  });
}
