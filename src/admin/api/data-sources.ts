// Admin JSON API for data sources and connectors (spec §2, §4; DESIGN §5): CRUD with masked credentials, the connector list, and the connection test.
import { buildGovernanceRuntime } from '../../runtime/governance.js';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { z } from 'zod';
import type { DataSource, JsonObject } from '../../store/schema.js';
import { createDataSource, deleteDataSource, getDataSourceBySourceId, listDataSources, updateDataSource } from '../../store/repos/data-sources.js';
import { createSourceRole } from '../../store/repos/source-roles.js';
import { listGrantsForSource } from '../../store/repos/grants.js';
import { defaultRoles } from '../../governance/source-roles.js';
import { carryMaskedCredentials, maskSourceConfig, type ConnectorRegistry, type SecretResolver } from '../../connectors/registry.js';
import type { Connector } from '../../connectors/types.js';
import { agentAuthDeps, revokeIdentityKeySessions } from '../../identity/index.js';
import { GatehouseError } from '../../errors/registry.js';
import { ConflictError } from '../../store/errors.js';
import { requirePermission } from '../auth/principal.js';
import type { AdminModuleContext } from '../module.js';
import { validationError, validationItems, type ValidationErrorItem } from '../../http/validation.js';
import { audit, given, iso, metadataSchema, notFound, sourceIdSchema } from './shared.js';

/** Whole connection test, connect and first answer included (spec §2 connection test). */
export const CONNECTION_TEST_TIMEOUT_MS = 10_000;

const nameSchema = z
  .string()
  .min(1)
  .max(128)
  .refine((s) => ![...s].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f), 'must not contain control characters');
const cacheStrategySchema = z.string().min(1).max(64).regex(/^[a-z][a-z0-9_]*$/, 'must be lower case letters, digits and "_"');
/** Path form: also admits the older, looser ids the store allows, so such a source can still be read and deleted. */
const pathSourceId = z.string().min(1).max(63).regex(/^[A-Za-z0-9][A-Za-z0-9._~-]{0,62}$/, 'must be a source id');
export const sourceParams = z.strictObject({ source_id: pathSourceId });

export interface DataSourceResponse {
  id: number;
  source_id: string;
  name: string;
  source_type: string;
  connection_config: Record<string, unknown>;
  cache_strategy: string;
  enabled: boolean;
  metadata: Record<string, unknown>;
  created_at: string | null;
  updated_at: string | null;
}

const dataSourceResponse = z.object({
  id: z.number().int(),
  source_id: z.string(),
  name: z.string(),
  source_type: z.string(),
  connection_config: z.record(z.string(), z.unknown()),
  cache_strategy: z.string(),
  enabled: z.boolean(),
  metadata: z.record(z.string(), z.unknown()),
  created_at: z.string().nullable(),
  updated_at: z.string().nullable(),
});

/** A URL-safe slug of the name (`^[a-z0-9][a-z0-9_-]{0,62}$`), `source` when nothing of the name survives. */
export function slugify(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 50)
    .replace(/-+$/g, '');
  return slug.length > 0 ? slug : 'source';
}

/** Adds the connector's schema issues under connection_config, so one 422 lists every problem with its exact loc. */
function checkConfig(connector: Connector, config: unknown, ctx: z.RefinementCtx, base: (string | number)[]): void {
  const r = connector.configSchema.safeParse(config ?? {});
  if (r.success) return;
  for (const issue of r.error.issues) ctx.addIssue({ ...issue, path: [...base, ...issue.path] } as never);
}

/** The egress identity of a test for a source not yet registered: it can never be listed for private egress. */
const CONNECTION_TEST_SOURCE = '(connection-test)';

export function buildDataSourceRoutes(ctx: AdminModuleContext, connectors: ConnectorRegistry, resolveSecret: SecretResolver): void {
  const { app, api, services } = ctx;
  const read = requirePermission('sources:read');
  const write = requirePermission('sources:write');
  const deps = agentAuthDeps(services);
  const connectorOf = (s: { source_type: string; connector_key?: string | null }): Connector | undefined => connectors.forSource(s);

  const present = (row: DataSource): DataSourceResponse => {
    const connector = connectorOf(row);
    return {
      id: row.id,
      source_id: row.source_id,
      name: row.name,
      source_type: row.source_type,
      connection_config: maskSourceConfig(row.connection_config, connector?.credentials ?? []),
      cache_strategy: row.cache_strategy,
      enabled: row.enabled,
      metadata: row.metadata,
      created_at: iso(row.created_at),
      updated_at: iso(row.updated_at),
    };
  };

  const connectorCheck = (b: { source_type: string; connector_key?: string | null | undefined; connection_config?: unknown }, c: z.RefinementCtx): void => {
    const key = b.connector_key ?? b.source_type;
    const connector = connectors.get(key);
    if (!connector || !connector.active) {
      c.addIssue({ code: 'custom', path: [b.connector_key ? 'connector_key' : 'source_type'], message: `must name a connector: ${connectors.keys().join(', ')}` });
      return;
    }
    if (connector.source_type !== b.source_type) {
      c.addIssue({ code: 'custom', path: ['source_type'], message: `connector ${connector.key} serves source_type ${connector.source_type}` });
      return;
    }
    checkConfig(connector, b.connection_config, c, ['connection_config']);
  };

  const createSchema = z
    .strictObject({
      name: nameSchema,
      source_type: z.string().min(1).max(64),
      source_id: sourceIdSchema.nullish(),
      connector_key: z.string().min(1).max(64).nullish(),
      connection_config: z.record(z.string(), z.unknown()).default({}),
      metadata: metadataSchema.default({}),
      enabled: z.boolean().default(true),
      cache_strategy: cacheStrategySchema.default('deterministic_first'),
      /** Creates the reader, writer and admin roles of DESIGN §6 with the source. */
      create_default_roles: z.boolean().default(false),
    })
    .superRefine(connectorCheck);

  const updateSchema = z.strictObject({
    cache_strategy: cacheStrategySchema.nullish(),
    connection_config: z.record(z.string(), z.unknown()).nullish(),
    enabled: z.boolean().nullish(),
    metadata: metadataSchema.nullish(),
    name: nameSchema.nullish(),
    source_type: z.string().min(1).max(64).nullish(),
  });

  const testSchema = z
    .strictObject({
      source_type: z.string().min(1).max(64),
      connection_config: z.record(z.string(), z.unknown()).nullish(),
      connector_key: z.string().min(1).max(64).nullish(),
      name: nameSchema.nullish(),
      source_id: pathSourceId.nullish(),
    })
    .superRefine((b, c) => {
      // Without a config, the stored config of source_id is tested (checked in the handler).
      if (!given(b.connection_config) && given(b.source_id)) return;
      connectorCheck(b, c);
    });

  const parsedConfig = (connector: Connector, config: unknown): JsonObject => connector.configSchema.parse(config ?? {}) as JsonObject;

  const announce = async (): Promise<void> => {
    try {
      await services.registry.announceChange();
    } catch (err) {
      // The change is committed; replicas pick it up on their periodic reload.
      services.log.warn({ err: { code: (err as { code?: string }).code } }, 'source change announcement failed');
    }
  };

  api.route(app, {
    method: 'GET',
    url: '/api/connectors',
    summary: 'Every connector a source can be registered on, with its active flag and usage',
    tags: ['data-sources'],
    preHandler: read,
    handler: async () => {
      const usage = await services.db
        .selectFrom('data_sources')
        .select([sql<string>`coalesce(connector_key, source_type)`.as('key'), sql<number>`count(*)::int`.as('n')])
        .groupBy(sql`coalesce(connector_key, source_type)`)
        .execute();
      const byKey = new Map(usage.map((u) => [u.key, Number(u.n)]));
      return connectors.list().map((c) => ({
        key: c.key,
        name: c.name,
        description: c.description,
        source_type: c.source_type,
        capabilities: [...c.capabilities],
        active: c.active,
        usage: byKey.get(c.key) ?? 0,
        credential_fields: c.credentials.map((f) => ({ literal: f.literal, reference: f.ref })),
      }));
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources',
    summary: 'List data sources (credentials masked)',
    tags: ['data-sources'],
    preHandler: read,
    response: z.array(dataSourceResponse),
    handler: async () => (await listDataSources(services.db)).map(present),
  });

  api.route(app, {
    method: 'POST',
    url: '/api/data-sources',
    summary: 'Create a data source (source_id generated from the name when omitted)',
    tags: ['data-sources'],
    preHandler: write,
    body: createSchema,
    response: dataSourceResponse,
    successStatus: 201,
    handler: async ({ body, req }) => {
      const connector = connectors.get(body.connector_key ?? body.source_type)!;
      const config = parsedConfig(connector, body.connection_config);
      const base = body.source_id ?? slugify(body.name);
      const create = (sourceId: string) =>
        services.db.transaction().execute(async (tx) => {
          const row = await createDataSource(tx, {
            source_id: sourceId,
            name: body.name,
            source_type: body.source_type,
            connector_key: body.connector_key ?? null,
            connection_config: config,
            cache_strategy: body.cache_strategy,
            enabled: body.enabled,
            metadata: body.metadata as JsonObject,
          });
          if (body.create_default_roles) {
            for (const t of defaultRoles(body.source_type)) {
              await createSourceRole(tx, { source_id: sourceId, role_key: t.role_key, description: t.description, rules: t.rules as never });
            }
          }
          return row;
        });
      let row: DataSource | undefined;
      if (given(body.source_id)) {
        row = await create(body.source_id!);
      } else {
        // A generated id takes the first free suffix; losing a race to another create moves on to the next one.
        const candidates = [base, ...Array.from({ length: 49 }, (_, i) => `${base}-${i + 2}`), `${base}-${randomBytes(4).toString('hex')}`];
        for (const candidate of candidates) {
          if (candidate !== base && (await getDataSourceBySourceId(services.db, candidate))) continue;
          try {
            row = await create(candidate);
            break;
          } catch (err) {
            if (!(err instanceof ConflictError && err.field === 'source_id')) throw err;
          }
        }
        if (row === undefined) throw new GatehouseError('conflict', 'No free source_id could be derived from the name; give one.');
      }
      await announce();
      const out = present(row);
      await audit(services, req, 'data_source.create', { type: 'data_source', id: row.source_id }, { after: { ...out, default_roles: body.create_default_roles } }, 201);
      return out;
    },
  });

  api.route(app, {
    method: 'POST',
    url: '/api/data-sources/test',
    summary: 'Test a connection (really connects; nothing is stored)',
    tags: ['data-sources'],
    preHandler: write,
    body: testSchema,
    response: z.object({ ok: z.boolean(), latency_ms: z.number(), error: z.string().nullable() }),
    handler: async ({ body, req }) => {
      let connector: Connector;
      let config: Record<string, unknown>;
      if (!given(body.connection_config) && given(body.source_id)) {
        const stored = await getDataSourceBySourceId(services.db, body.source_id!);
        if (!stored) throw notFound('data source');
        const c = connectorOf(stored);
        if (!c) throw new GatehouseError('invalid_request', 'The stored source has no connector in this build.');
        connector = c;
        config = stored.connection_config;
      } else {
        connector = connectors.get(body.connector_key ?? body.source_type)!;
        config = parsedConfig(connector, body.connection_config);
      }
      const { egress } = await buildGovernanceRuntime(services);
      const testedAs = body.source_id ?? CONNECTION_TEST_SOURCE;
      const dispatcher = egress.forSource(testedAs);
      const checkTarget = (hostname: string) => egress.checkTarget(testedAs, hostname);
      const result = await connector.test(config, { resolveSecret, timeoutMs: CONNECTION_TEST_TIMEOUT_MS, dispatcher, checkTarget });
      await audit(services, req, 'data_source.test', { type: 'data_source', id: body.source_id ?? body.name ?? '(unsaved)' }, undefined, 200, {
        connector: connector.key,
        connection_config: maskSourceConfig(config, connector.credentials),
        ok: result.ok,
        error: result.error,
      });
      return result;
    },
  });

  api.route(app, {
    method: 'GET',
    url: '/api/data-sources/:source_id',
    summary: 'Get a data source (credentials masked)',
    tags: ['data-sources'],
    preHandler: read,
    params: sourceParams,
    response: dataSourceResponse,
    handler: async ({ params }) => {
      const row = await getDataSourceBySourceId(services.db, params.source_id);
      if (!row) throw notFound('data source');
      return present(row);
    },
  });

  api.route(app, {
    method: 'PATCH',
    url: '/api/data-sources/:source_id',
    summary: 'Update a data source; a credential sent back as "****" keeps the stored one',
    tags: ['data-sources'],
    preHandler: write,
    params: sourceParams,
    body: updateSchema,
    response: dataSourceResponse,
    handler: async ({ params, body, req }) => {
      const before = await getDataSourceBySourceId(services.db, params.source_id);
      if (!before) throw notFound('data source');
      const sourceType = body.source_type ?? before.source_type;
      const connector = connectors.get(before.connector_key ?? sourceType);
      const items: ValidationErrorItem[] = [];
      if (!connector || !connector.active || connector.source_type !== sourceType) {
        items.push({ loc: ['body', 'source_type'], msg: `must name a connector: ${connectors.keys().join(', ')}`, type: 'value_error' });
        throw validationError(items);
      }
      let config: JsonObject | undefined;
      if (given(body.connection_config) || given(body.source_type)) {
        const candidate = carryMaskedCredentials(body.connection_config ?? before.connection_config, before.connection_config, connector.credentials);
        const r = connector.configSchema.safeParse(candidate);
        if (!r.success) {
          throw validationError(validationItems('body', r.error, candidate).map((i) => ({ ...i, loc: ['body', 'connection_config', ...i.loc.slice(1)] })));
        }
        config = r.data as JsonObject;
      }
      const row = await updateDataSource(services.db, params.source_id, {
        ...(given(body.name) ? { name: body.name } : {}),
        ...(given(body.source_type) ? { source_type: body.source_type } : {}),
        ...(given(body.cache_strategy) ? { cache_strategy: body.cache_strategy } : {}),
        ...(given(body.enabled) ? { enabled: body.enabled } : {}),
        ...(given(body.metadata) ? { metadata: body.metadata as JsonObject } : {}),
        ...(config !== undefined ? { connection_config: config } : {}),
      });
      if (!row) throw notFound('data source');
      await announce();
      const out = present(row);
      await audit(services, req, 'data_source.update', { type: 'data_source', id: row.source_id }, { before: present(before), after: out });
      return out;
    },
  });

  api.route(app, {
    method: 'DELETE',
    url: '/api/data-sources/:source_id',
    summary: 'Delete a data source (its roles, grants, approvals and jobs go with it)',
    tags: ['data-sources'],
    preHandler: write,
    params: sourceParams,
    response: z.object({ deleted: z.boolean(), source_id: z.string() }),
    handler: async ({ params, req }) => {
      const before = await getDataSourceBySourceId(services.db, params.source_id);
      if (!before) throw notFound('data source');
      const holders = await listGrantsForSource(services.db, params.source_id);
      const deleted = await deleteDataSource(services.db, params.source_id);
      if (!deleted) throw notFound('data source');
      await revokeIdentityKeySessions(deps, holders.map((g) => g.identity_id));
      await announce();
      await audit(services, req, 'data_source.delete', { type: 'data_source', id: params.source_id }, { before: present(before) });
      return { deleted: true, source_id: params.source_id };
    },
  });
}
