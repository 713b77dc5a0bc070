// Console pages for data sources under /dashboard/data-sources: list with registry state and a connection test per source, the spec's create and test forms (test result inline, nothing stored), edit, roles and their rules, the grants on a source.
import { z } from 'zod';
import { GatehouseError } from '../../errors/registry.js';
import { listDataSources } from '../../store/repos/data-sources.js';
import { listGrantsForSource } from '../../store/repos/grants.js';
import { getIdentityById } from '../../store/repos/identities.js';
import type { AdminModuleContext } from '../module.js';
import { callApi, okOrThrow } from './api-call.js';
import { demand, pageContext, sendPage, wantsJson, type PageContext } from './context.js';
import { checkbox, ConsoleForm, emptyForm, Field, CheckboxField, SelectField, TextAreaField, intText, optionalText, registerConsoleForm, requiredText, keptValues, type FormState } from './forms.js';
import { Layout } from './layout.js';
import { DataTable } from './data-table.js';
import { EnabledBadge, Empty, PostButton, Time, seg } from './ui.js';

const BASE = '/dashboard/data-sources';
const crumbs = (...more: Array<{ label: string; href?: string }>) => [{ label: 'Data sources', href: BASE }, ...more];

/** The connection fields shared by the spec's create and test forms (spec §2 "Data source create/test (form)"). */
const connectionFields = {
  source_type: requiredText(64),
  auth_header: optionalText(128),
  base_url: optionalText(2048),
  connector_key: optionalText(64),
  database: optionalText(63),
  host: optionalText(253),
  password: optionalText(1024),
  password_ref: optionalText(4096),
  port: intText(5432, 1, 65_535),
  token: optionalText(8192),
  token_ref: optionalText(4096),
  user: optionalText(63),
};

export const dataSourceCreateForm = z.object({
  name: requiredText(128),
  cache_strategy: optionalText(64).transform((v) => v || 'deterministic_first'),
  create_default_roles: checkbox(),
  source_id: optionalText(63),
  ...connectionFields,
});

export const dataSourceTestForm = z.object({
  ...connectionFields,
  /** Beside the spec's fields: test a stored source's own configuration (the list's "Test" button). */
  source_id: optionalText(63),
  name: optionalText(128),
});

type ConnectionInput = { [K in keyof typeof connectionFields]: z.output<(typeof connectionFields)[K]> };

/** The connection_config a connector reads, from the flat form fields; which fields count depends on the source type. */
function connectionConfig(b: ConnectionInput): Record<string, unknown> {
  const set = (o: Record<string, unknown>, k: string, v: string | number) => {
    if (v !== '') o[k] = v;
  };
  const out: Record<string, unknown> = {};
  if (b.source_type === 'http') {
    set(out, 'base_url', b.base_url);
    set(out, 'auth_header', b.auth_header);
    set(out, 'token', b.token);
    set(out, 'token_ref', b.token_ref);
  } else {
    set(out, 'host', b.host);
    out.port = b.port;
    set(out, 'database', b.database);
    set(out, 'user', b.user);
    set(out, 'password', b.password);
    set(out, 'password_ref', b.password_ref);
  }
  return out;
}

/** connection_config.X is the form's X. */
const fieldOf = (p: Array<string | number>) => (p[0] === 'connection_config' && typeof p[1] === 'string' ? p[1] : String(p[0]));

const hasConnectionInput = (b: ConnectionInput) => ['base_url', 'host', 'database', 'user', 'token', 'token_ref', 'password', 'password_ref'].some((k) => b[k as keyof ConnectionInput] !== '');

interface TestResult {
  ok: boolean;
  latency_ms: number;
  error: string | null;
}

function TestOutcome({ result }: { result: TestResult | null }): JSX.Element {
  return (
    <div id="test-result" aria-live="polite">
      {result === null ? (
        ''
      ) : result.ok ? (
        <p class="success" role="status">
          Connection works ({Math.round(result.latency_ms)} ms). Nothing was stored.
        </p>
      ) : (
        <p class="form-error" role="status">
          <span safe>Connection failed: {result.error ?? 'unknown error'}</span> ({Math.round(result.latency_ms)} ms). Nothing was stored.
        </p>
      )}
    </div>
  );
}

function ConnectionInputs({ form }: { form: FormState }): JSX.Element {
  return (
    <>
      <SelectField form={form} name="source_type" label="Source type" required options={[['http', 'HTTP API'], ['postgres', 'PostgreSQL']]} />
      <Field form={form} name="connector_key" label="Connector" hint="Leave empty to use the source type's connector." maxlength={64} />
      <fieldset>
        <legend>HTTP sources</legend>
        <Field form={form} name="base_url" label="Base URL" type="url" placeholder="https://api.example.com/v1/" />
        <Field form={form} name="auth_header" label="Auth header" hint="Default Authorization." />
        <Field form={form} name="token" label="Token" type="password" autocomplete="off" />
        <Field form={form} name="token_ref" label="Token reference" hint="A secret reference such as env:NAME or file:/path (preferred to a literal token)." />
      </fieldset>
      <fieldset>
        <legend>PostgreSQL sources</legend>
        <Field form={form} name="host" label="Host" />
        <Field form={form} name="port" label="Port" type="number" value="5432" min={1} max={65535} />
        <Field form={form} name="database" label="Database" />
        <Field form={form} name="user" label="User" autocomplete="off" />
        <Field form={form} name="password" label="Password" type="password" autocomplete="off" />
        <Field form={form} name="password_ref" label="Password reference" hint="env:NAME or file:/path (preferred to a literal password)." />
      </fieldset>
    </>
  );
}

function CreateForm({ ctx, form, result }: { ctx: PageContext; form: FormState; result: TestResult | null }): JSX.Element {
  return (
    <ConsoleForm ctx={ctx} form={form} action={`${BASE}/create`} submit="Create data source">
      <Field form={form} name="name" label="Name" required maxlength={128} />
      <Field form={form} name="source_id" label="Source id" hint="Used in /proxy/{source_id}/ and as the wire database name; derived from the name when empty." maxlength={63} />
      <Field form={form} name="cache_strategy" label="Cache strategy" value="deterministic_first" />
      <CheckboxField form={form} name="create_default_roles" label="Create the default roles (reader, writer, admin)" checked />
      <ConnectionInputs form={form} />
      <div class="form-actions">
        <button type="submit" class="button secondary" formaction={`${BASE}/test`} hx-post={`${BASE}/test`} hx-target="#test-result" hx-select="#test-result" hx-swap="outerHTML">
          Test connection
        </button>
      </div>
      <TestOutcome result={result} />
    </ConsoleForm>
  );
}

export function registerDataSourcePages({ app, api, services }: AdminModuleContext): void {
  const db = services.db;

  api.describe({ method: 'GET', url: BASE, summary: 'Data sources page', tags: ['console'], produces: ['text/html'] });
  app.get(BASE, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'sources:read');
    const rows = await listDataSources(db);
    const canWrite = ctx.can('sources:write');
    return sendPage(
      reply,
      <Layout ctx={ctx} title="Data sources" crumbs={crumbs()} actions={canWrite ? <a class="button" href={`${BASE}/new`}>New data source</a> : ''}>
        <DataTable
          rows={rows}
          empty="No data sources yet."
          columns={[
            { label: 'Name', cell: (r) => <a href={`${BASE}/${seg(r.source_id)}`} safe>{r.name}</a> },
            { label: 'Source id', cell: (r) => <code safe>{r.source_id}</code> },
            { label: 'Type', text: (r) => r.source_type },
            { label: 'State', cell: (r) => <EnabledBadge enabled={r.enabled} /> },
            { label: 'Health', cell: (r) => (!r.enabled ? <span class="badge">off</span> : services.registry.get(r.source_id) !== undefined ? <span class="badge ok">serving</span> : <span class="badge warn">not loaded</span>) },
            { label: 'Check', show: canWrite, cell: (r) => <PostButton ctx={ctx} action={`${BASE}/test`} fields={{ source_type: r.source_type, source_id: r.source_id }} label="Test connection" variant="secondary" /> },
          ]}
        />
      </Layout>,
    );
  });

  const newPage = (ctx: PageContext, form: FormState, result: TestResult | null = null) => (
    <Layout ctx={ctx} title="New data source" crumbs={crumbs({ label: 'New data source' })}>
      <CreateForm ctx={ctx} form={form} result={result} />
    </Layout>
  );
  const defaults = () => emptyForm({ source_type: 'http', cache_strategy: 'deterministic_first', port: '5432', create_default_roles: 'on' });

  api.describe({ method: 'GET', url: `${BASE}/new`, summary: 'The data source create form', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/new`, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'sources:write');
    return sendPage(reply, newPage(ctx, defaults()));
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/create`,
    summary: 'Create a data source (spec §2 data source create form); 303 to its page',
    permission: 'sources:write',
    schema: dataSourceCreateForm,
    render: (_req, ctx, form) => newPage(ctx, form),
    handle: async ({ req, reply, body }) => {
      const created = okOrThrow(
        await callApi(app, req, 'POST', '/api/data-sources', {
          name: body.name,
          source_type: body.source_type,
          ...(body.source_id ? { source_id: body.source_id } : {}),
          ...(body.connector_key ? { connector_key: body.connector_key } : {}),
          connection_config: connectionConfig(body),
          cache_strategy: body.cache_strategy,
          create_default_roles: body.create_default_roles,
        }),
        fieldOf,
      );
      return reply.redirect(`${BASE}/${seg(created.source_id)}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/test`,
    summary: 'Test a connection (spec §2 data source test form); the result is shown inline and nothing is stored',
    permission: 'sources:write',
    schema: dataSourceTestForm,
    render: (_req, ctx, form) => newPage(ctx, form),
    handle: async ({ req, reply, ctx, body }) => {
      const stored = !hasConnectionInput(body) && body.source_id !== '';
      const result = okOrThrow(
        await callApi(app, req, 'POST', '/api/data-sources/test', {
          source_type: body.source_type,
          // With a source id the test runs under that source's egress rules (a private target needs it listed).
          ...(body.source_id ? { source_id: body.source_id } : {}),
          ...(stored ? {} : { connection_config: connectionConfig(body) }),
          ...(body.connector_key ? { connector_key: body.connector_key } : {}),
          ...(body.name ? { name: body.name } : {}),
        }),
        fieldOf,
      ) as TestResult;
      if (wantsJson(req)) return reply.send(result);
      if (stored) {
        return (
          <Layout ctx={ctx} title="Connection test" crumbs={crumbs({ label: body.source_id, href: `${BASE}/${seg(body.source_id)}` }, { label: 'Connection test' })}>
            <TestOutcome result={result} />
            <p>
              <a href={BASE}>Back to the data sources</a>
            </p>
          </Layout>
        );
      }
      return newPage(ctx, { values: keptValues(req.body), errors: {} }, result);
    },
  });

  const detailPage = async (req: Parameters<typeof pageContext>[0], ctx: PageContext, sourceId: string, forms: { edit?: FormState; role?: FormState } = {}) => {
    const answer = await callApi(app, req, 'GET', `/api/data-sources/${seg(sourceId)}`);
    if (answer.status === 404 || answer.status === 422) throw new GatehouseError('not_found', 'There is no such data source.');
    const source = okOrThrow(answer);
    const roles = okOrThrow(await callApi(app, req, 'GET', `/api/data-sources/${seg(sourceId)}/roles`)) as Array<{ id: number; role_key: string; description: string; enabled: boolean; rules: unknown }>;
    const grants = await listGrantsForSource(db, sourceId);
    const names = new Map<number, string>();
    for (const g of grants) if (!names.has(g.identity_id)) names.set(g.identity_id, (await getIdentityById(db, g.identity_id))?.name ?? String(g.identity_id));
    const canWrite = ctx.can('sources:write');
    const edit = forms.edit ?? emptyForm({ name: source.name, cache_strategy: source.cache_strategy });
    const role = forms.role ?? emptyForm({ rules: '{\n  "http": [{ "methods": ["GET"], "paths": ["/**"], "approval": "never" }]\n}' });
    return (
      <Layout ctx={ctx} title={`Data source ${source.name}`} crumbs={crumbs({ label: source.name })}>
        <dl class="props">
          <dt>Source id</dt>
          <dd>
            <code safe>{source.source_id}</code>
          </dd>
          <dt>Type</dt>
          <dd safe>{source.source_type}</dd>
          <dt>State</dt>
          <dd>
            <EnabledBadge enabled={source.enabled} />
          </dd>
          <dt>Cache strategy</dt>
          <dd safe>{source.cache_strategy}</dd>
          <dt>Connection</dt>
          <dd>
            <pre safe>{JSON.stringify(source.connection_config, null, 2)}</pre>
          </dd>
          <dt>Created</dt>
          <dd>
            <Time value={source.created_at} />
          </dd>
          {(source.connection_config as { privileges?: unknown } | null)?.privileges === 'managed' ? (
            <>
              <dt>Privileges</dt>
              <dd>
                <a href={`${BASE}/${seg(sourceId)}/privileges`}>Managed roles: state and pending plan</a>
              </dd>
            </>
          ) : (
            ''
          )}
          {ctx.can('catalog:read') ? (
            <>
              <dt>Catalog</dt>
              <dd>
                <a href={`${BASE}/${seg(sourceId)}/catalog`}>Structure, changes and classifications</a>
              </dd>
            </>
          ) : (
            ''
          )}
        </dl>
        {canWrite ? (
          <div class="form-actions">
            <PostButton ctx={ctx} action={`${BASE}/test`} fields={{ source_type: source.source_type, source_id: source.source_id }} label="Test connection" variant="secondary" />
            <PostButton ctx={ctx} action={`${BASE}/${seg(sourceId)}/enabled`} fields={{ enabled: source.enabled ? 'false' : 'true' }} label={source.enabled ? 'Disable' : 'Enable'} variant={source.enabled ? 'danger' : undefined} />
          </div>
        ) : (
          ''
        )}
        <h2>Roles</h2>
        <DataTable
          rows={roles}
          empty="No roles: no identity can reach this source."
          columns={[
            { label: 'Role', text: (r) => r.role_key },
            { label: 'Description', text: (r) => r.description },
            { label: 'State', cell: (r) => <EnabledBadge enabled={r.enabled} /> },
            { label: 'Rules', cell: (r) => <pre safe>{JSON.stringify(r.rules, null, 2)}</pre> },
          ]}
        />
        <h2>Grants on this source</h2>
        {grants.length === 0 ? (
          <Empty>No identity holds a role here.</Empty>
        ) : (
          <ul>
            {grants.map((g) => (
              <li>
                <a href={`/dashboard/access-control/identities/${g.identity_id}`} safe>
                  {names.get(g.identity_id) ?? String(g.identity_id)}
                </a>{' '}
                — <span safe>{g.role_key}</span> {g.enabled ? '' : <span class="badge bad">disabled</span>} {g.expires_at ? <span>until <Time value={g.expires_at} /></span> : ''}
              </li>
            ))}
          </ul>
        )}
        {canWrite ? (
          <>
            <h2>Add a role</h2>
            <ConsoleForm ctx={ctx} form={role} action={`${BASE}/${seg(sourceId)}/roles`} submit="Add role">
              <Field form={role} name="role_key" label="Role key" required maxlength={64} />
              <Field form={role} name="description" label="Description" maxlength={512} />
              <TextAreaField form={role} name="rules" label="Rules (JSON)" rows={6} code required hint='HTTP: {"http": [{"methods", "paths", "approval"}]}; SQL: {"sql": [{"operations", "tables"}]} (docs/governance).' />
            </ConsoleForm>
            <h2>Edit</h2>
            <ConsoleForm ctx={ctx} form={edit} action={`${BASE}/${seg(sourceId)}/update`} submit="Save changes">
              <Field form={edit} name="name" label="Name" required maxlength={128} />
              <Field form={edit} name="cache_strategy" label="Cache strategy" required />
            </ConsoleForm>
          </>
        ) : (
          ''
        )}
      </Layout>
    );
  };

  const sourceIdOf = (req: { params: unknown }) => (req.params as { source_id: string }).source_id;

  api.describe({ method: 'GET', url: `${BASE}/:source_id`, summary: 'One data source: connection (masked), roles and rules, grants', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/:source_id`, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'sources:read');
    return sendPage(reply, await detailPage(req, ctx, sourceIdOf(req)));
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:source_id/update`,
    summary: 'Edit a data source (form: name, cache_strategy)',
    permission: 'sources:write',
    schema: z.object({ name: requiredText(128), cache_strategy: requiredText(64) }),
    render: (req, ctx, form) => detailPage(req, ctx, sourceIdOf(req), { edit: form }),
    handle: async ({ req, reply, body }) => {
      okOrThrow(await callApi(app, req, 'PATCH', `/api/data-sources/${seg(sourceIdOf(req))}`, body));
      return reply.redirect(`${BASE}/${seg(sourceIdOf(req))}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:source_id/enabled`,
    summary: 'Enable or disable a data source (form: enabled true|false)',
    permission: 'sources:write',
    schema: z.object({ enabled: z.enum(['true', 'false']) }),
    render: (req, ctx) => detailPage(req, ctx, sourceIdOf(req)),
    handle: async ({ req, reply, body }) => {
      okOrThrow(await callApi(app, req, 'PATCH', `/api/data-sources/${seg(sourceIdOf(req))}`, { enabled: body.enabled === 'true' }));
      return reply.redirect(`${BASE}/${seg(sourceIdOf(req))}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:source_id/roles`,
    summary: 'Add a role to a data source (form: role_key, description, rules as JSON)',
    permission: 'sources:write',
    schema: z.object({ role_key: requiredText(64), description: optionalText(512), rules: requiredText(65_536) }),
    render: (req, ctx, form) => detailPage(req, ctx, sourceIdOf(req), { role: form }),
    handle: async ({ req, reply, body }) => {
      let rules: unknown;
      try {
        rules = JSON.parse(body.rules);
      } catch (err) {
        throw new GatehouseError('validation_failed', 'The input is invalid.', { details: { detail: [{ loc: ['body', 'rules'], msg: `is not valid JSON (${(err as Error).message})`, type: 'json_invalid' }] } });
      }
      okOrThrow(await callApi(app, req, 'POST', `/api/data-sources/${seg(sourceIdOf(req))}/roles`, { role_key: body.role_key, description: body.description, rules }));
      return reply.redirect(`${BASE}/${seg(sourceIdOf(req))}`, 303);
    },
  });
}
