// Console pages for identities (agents) under /dashboard/access-control/identities: list, the spec's create form (a generated key shown once), edit, enable/disable, key rotation and grants per source with expiry.
import { z } from 'zod';
import { validationError } from '../../http/validation.js';
import { GatehouseError } from '../../errors/registry.js';
import { listIdentities, getIdentityById } from '../../store/repos/identities.js';
import { listGrantsForIdentity } from '../../store/repos/grants.js';
import { listDataSources } from '../../store/repos/data-sources.js';
import type { AdminModuleContext } from '../module.js';
import { callApi, okOrThrow } from './api-call.js';
import { demand, pageContext, sendPage, type PageContext } from './context.js';
import { checkbox, choice, ConsoleForm, emptyForm, Field, CheckboxField, SelectField, optionalText, registerConsoleForm, requiredText, type FormState } from './forms.js';
import { Layout } from './layout.js';
import { DataTable } from './data-table.js';
import { EnabledBadge, PostButton, ShownOnce, Time, pageId, seg, splitList } from './ui.js';

const BASE = '/dashboard/access-control/identities';
const crumbs = (...more: Array<{ label: string; href?: string }>) => [{ label: 'Identities', href: BASE }, ...more];

/** Spec §2 "Identity create (form)": name required; agent_type default "custom"; the rest optional text. */
export const identityCreateForm = z.object({
  name: requiredText(128),
  agent_type: optionalText(64).transform((v) => v || 'custom'),
  api_key: optionalText(4096),
  generate_key: checkbox(),
  mapped_pg_role: optionalText(63),
  pg_password: optionalText(4096),
  pg_username: optionalText(63),
  roles: optionalText(4096),
  team: optionalText(128),
});

const identityEditForm = z.object({
  name: requiredText(128),
  agent_type: optionalText(64).transform((v) => v || 'custom'),
  mapped_pg_role: optionalText(63),
  pg_username: optionalText(63),
  roles: optionalText(4096),
  team: optionalText(128),
});

const grantForm = z.object({
  source_id: requiredText(128),
  role_key: requiredText(64),
  expires_at: optionalText(64),
});

function CreateForm({ ctx, form }: { ctx: PageContext; form: FormState }): JSX.Element {
  return (
    <ConsoleForm ctx={ctx} form={form} action={`${BASE}/create`} submit="Create identity">
      <Field form={form} name="name" label="Name" required maxlength={128} />
      <Field form={form} name="agent_type" label="Agent type" value="custom" maxlength={64} />
      <CheckboxField form={form} name="generate_key" label="Generate a key (shown once after creating)" checked={form.values.api_key === undefined || form.values.api_key === ''} />
      <Field form={form} name="api_key" label="API key" type="password" autocomplete="off" hint="Or give the key yourself; leave empty when generating one." />
      <Field form={form} name="roles" label="Roles" hint="Comma-separated identity roles (used by policy conditions)." />
      <Field form={form} name="team" label="Team" maxlength={128} />
      <Field form={form} name="pg_username" label="PostgreSQL user name" hint="The user name psql logs in with; defaults to the name." maxlength={63} />
      <Field form={form} name="pg_password" label="PostgreSQL password" type="password" autocomplete="off" hint="The wire password is the API key: leave empty, or give the same value as the API key." />
      <Field form={form} name="mapped_pg_role" label="Mapped PostgreSQL role" hint="Upstream role the identity's statements run as." maxlength={63} />
    </ConsoleForm>
  );
}

function EditForm({ ctx, form, id }: { ctx: PageContext; form: FormState; id: number }): JSX.Element {
  return (
    <ConsoleForm ctx={ctx} form={form} action={`${BASE}/${id}/update`} submit="Save changes">
      <Field form={form} name="name" label="Name" required maxlength={128} />
      <Field form={form} name="agent_type" label="Agent type" maxlength={64} />
      <Field form={form} name="roles" label="Roles" hint="Comma-separated." />
      <Field form={form} name="team" label="Team" maxlength={128} />
      <Field form={form} name="pg_username" label="PostgreSQL user name" maxlength={63} />
      <Field form={form} name="mapped_pg_role" label="Mapped PostgreSQL role" maxlength={63} />
    </ConsoleForm>
  );
}

export function registerIdentityPages({ app, api, services }: AdminModuleContext): void {
  const db = services.db;

  api.describe({ method: 'GET', url: BASE, summary: 'Identities page', tags: ['console'], produces: ['text/html'] });
  app.get(BASE, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'identities:read');
    const rows = await listIdentities(db);
    return sendPage(
      reply,
      <Layout ctx={ctx} title="Identities" crumbs={crumbs()} actions={ctx.can('identities:write') ? <a class="button" href={`${BASE}/new`}>New identity</a> : ''}>
        <DataTable
          rows={rows}
          empty="No identities yet."
          columns={[
            { label: 'Name', cell: (r) => <a href={`${BASE}/${r.id}`} safe>{r.name}</a> },
            { label: 'Type', text: (r) => r.agent_type },
            { label: 'Roles', text: (r) => r.roles.join(', ') },
            { label: 'Team', text: (r) => r.team ?? '' },
            { label: 'State', cell: (r) => <EnabledBadge enabled={r.enabled} /> },
            { label: 'Created', cell: (r) => <Time value={r.created_at} /> },
          ]}
        />
      </Layout>,
    );
  });

  const newPage = (ctx: PageContext, form: FormState) => (
    <Layout ctx={ctx} title="New identity" crumbs={crumbs({ label: 'New identity' })}>
      <CreateForm ctx={ctx} form={form} />
    </Layout>
  );

  api.describe({ method: 'GET', url: `${BASE}/new`, summary: 'The identity create form', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/new`, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'identities:write');
    return sendPage(reply, newPage(ctx, emptyForm({ agent_type: 'custom' })));
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/create`,
    summary: 'Create an identity (spec §2 identity create form); a generated key is shown once on the answer page',
    permission: 'identities:write',
    schema: identityCreateForm,
    render: (_req, ctx, form) => newPage(ctx, form),
    handle: async ({ req, reply, ctx, body }) => {
      let key = body.api_key;
      if (body.pg_password) {
        if (key && key !== body.pg_password) throw validationError([{ loc: ['body', 'pg_password'], msg: 'must equal the API key: the wire password is the identity\'s API key (docs/pgwire.md "Login")', type: 'value_error' }]);
        if (!key && body.generate_key) throw validationError([{ loc: ['body', 'pg_password'], msg: 'leave empty when generating the key: the wire password is the generated key', type: 'value_error' }]);
        key = body.pg_password;
      }
      const json = {
        name: body.name,
        agent_type: body.agent_type,
        roles: splitList(body.roles),
        team: body.team || null,
        mapped_pg_role: body.mapped_pg_role || null,
        pg_username: body.pg_username || null,
        ...(key ? { api_key: key } : {}),
        ...(body.generate_key || !key ? { generate_key: body.generate_key } : {}),
      };
      const created = okOrThrow(await callApi(app, req, 'POST', '/api/identities', json));
      void reply.code(201);
      return (
        <Layout ctx={ctx} title="Identity created" crumbs={crumbs({ label: created.name, href: `${BASE}/${created.id}` }, { label: 'Created' })}>
          {created.api_key ? (
            <ShownOnce title={`Identity ${created.name} created.`} secret={created.api_key} what={`The API key of ${created.name}`} />
          ) : (
            <p class="success" role="status" safe>
              Identity {created.name} created with the key you supplied.
            </p>
          )}
          <p>
            <a class="button" href={`${BASE}/${created.id}`}>
              Open the identity
            </a>
          </p>
        </Layout>
      );
    },
  });

  const detailPage = async (ctx: PageContext, id: number, forms: { edit?: FormState; grant?: FormState; sso?: FormState } = {}) => {
    const row = await getIdentityById(db, id);
    if (!row) return null;
    const [grants, sources] = await Promise.all([listGrantsForIdentity(db, id), listDataSources(db)]);
    const canWrite = ctx.can('identities:write');
    const edit = forms.edit ?? emptyForm({ name: row.name, agent_type: row.agent_type, roles: row.roles.join(', '), team: row.team ?? '', pg_username: row.pg_username ?? '', mapped_pg_role: row.mapped_pg_role ?? '' });
    const grant = forms.grant ?? emptyForm({ role_key: 'reader' });
    const sso = forms.sso ?? emptyForm({ subject: row.oidc_subject ?? '', email: row.oidc_email ?? '' });
    return (
      <Layout ctx={ctx} title={`Identity ${row.name}`} crumbs={crumbs({ label: row.name })}>
        <dl class="props">
          <dt>Id</dt>
          <dd>{row.id}</dd>
          <dt>State</dt>
          <dd>
            <EnabledBadge enabled={row.enabled} />
          </dd>
          <dt>Agent type</dt>
          <dd safe>{row.agent_type}</dd>
          <dt>Roles</dt>
          <dd safe>{row.roles.join(', ')}</dd>
          <dt>Team</dt>
          <dd safe>{row.team ?? ''}</dd>
          <dt>PostgreSQL user name</dt>
          <dd safe>{row.pg_username ?? row.name}</dd>
          <dt>Mapped PostgreSQL role</dt>
          <dd safe>{row.mapped_pg_role ?? ''}</dd>
          <dt>Single sign-on subject</dt>
          <dd safe>{row.oidc_subject === null ? 'not mapped' : `${row.oidc_subject} (${row.oidc_issuer ?? ''})`}</dd>
          <dt>Single sign-on email</dt>
          <dd safe>{row.oidc_email ?? ''}</dd>
          <dt>Created</dt>
          <dd>
            <Time value={row.created_at} />
          </dd>
          <dt>Updated</dt>
          <dd>
            <Time value={row.updated_at} />
          </dd>
        </dl>
        {canWrite ? (
          <div class="form-actions">
            <PostButton ctx={ctx} action={`${BASE}/${id}/enabled`} fields={{ enabled: row.enabled ? 'false' : 'true' }} label={row.enabled ? 'Disable' : 'Enable'} variant={row.enabled ? 'danger' : undefined} />
            <PostButton ctx={ctx} action={`${BASE}/${id}/rotate-key`} label="Rotate key" variant="secondary" />
          </div>
        ) : (
          ''
        )}
        <h2>Grants</h2>
        <DataTable
          rows={grants}
          empty="No grants: this identity reaches no source."
          columns={[
            { label: 'Source', cell: (g) => <a href={`/dashboard/data-sources/${seg(g.source_id)}`} safe>{g.source_id}</a> },
            { label: 'Role', text: (g) => g.role_key },
            { label: 'State', cell: (g) => <EnabledBadge enabled={g.enabled && (g.expires_at === null || g.expires_at > new Date())} /> },
            { label: 'Expires', cell: (g) => (g.expires_at ? <Time value={g.expires_at} /> : 'never') },
            { label: 'Actions', show: canWrite, cell: (g) => <PostButton ctx={ctx} action={`${BASE}/${id}/grants/${g.id}/revoke`} label="Revoke" variant="danger" /> },
          ]}
        />
        {canWrite ? (
          <>
            <h2>Grant a role</h2>
            <ConsoleForm ctx={ctx} form={grant} action={`${BASE}/${id}/grants`} submit="Grant">
              <SelectField form={grant} name="source_id" label="Source" required options={sources.map((s) => [s.source_id, `${s.name} (${s.source_id})`] as const)} />
              <Field form={grant} name="role_key" label="Role" required hint="A role of that source, e.g. reader, writer, admin." />
              <Field form={grant} name="expires_at" label="Expires at" hint="Optional, ISO 8601 with a time zone (e.g. 2026-12-31T23:59:00Z); empty: never." />
            </ConsoleForm>
            <h2>Single sign-on</h2>
            <ConsoleForm ctx={ctx} form={sso} action={`${BASE}/${id}/oidc`} submit="Save mapping">
              <Field form={sso} name="subject" label="Subject" required maxlength={512} hint="The `sub` of this agent's JWTs at the configured issuer (docs/agent-jwt.md)." />
              <Field form={sso} name="email" label="Email" maxlength={320} hint="Informational only; never used to find the identity." />
            </ConsoleForm>
            {row.oidc_subject !== null ? (
              <div class="form-actions">
                <PostButton ctx={ctx} action={`${BASE}/${id}/oidc/remove`} label="Remove mapping" variant="danger" />
              </div>
            ) : (
              ''
            )}
            <h2>Edit</h2>
            <EditForm ctx={ctx} form={edit} id={id} />
          </>
        ) : (
          ''
        )}
      </Layout>
    );
  };

  const detailOr404 = async (ctx: PageContext, id: number, forms?: { edit?: FormState; grant?: FormState; sso?: FormState }) => {
    const page = await detailPage(ctx, id, forms);
    if (!page) throw new GatehouseError('not_found', 'There is no such identity.');
    return page;
  };

  api.describe({ method: 'GET', url: `${BASE}/:id`, summary: 'One identity: details, grants, edit', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/:id`, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'identities:read');
    return sendPage(reply, await detailOr404(ctx, pageId((req.params as { id: string }).id)));
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/update`,
    summary: 'Edit an identity (form)',
    permission: 'identities:write',
    schema: identityEditForm,
    render: (req, ctx, form) => detailOr404(ctx, pageId((req.params as { id: string }).id), { edit: form }),
    handle: async ({ req, reply, body }) => {
      const id = pageId((req.params as { id: string }).id);
      okOrThrow(
        await callApi(app, req, 'PATCH', `/api/identities/${id}`, {
          name: body.name,
          agent_type: body.agent_type,
          roles: splitList(body.roles),
          team: body.team || null,
          pg_username: body.pg_username || null,
          mapped_pg_role: body.mapped_pg_role || null,
        }),
      );
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/enabled`,
    summary: 'Enable or disable an identity (form: enabled true|false)',
    permission: 'identities:write',
    schema: z.object({ enabled: choice(['true', 'false'] as const) }),
    render: (req, ctx) => detailOr404(ctx, pageId((req.params as { id: string }).id)),
    handle: async ({ req, reply, body }) => {
      const id = pageId((req.params as { id: string }).id);
      okOrThrow(await callApi(app, req, 'PATCH', `/api/identities/${id}`, { enabled: body.enabled === 'true' }));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/rotate-key`,
    summary: 'Rotate an identity\'s key; the new key is shown once on the answer page',
    permission: 'identities:write',
    schema: z.object({}),
    render: (req, ctx) => detailOr404(ctx, pageId((req.params as { id: string }).id)),
    handle: async ({ req, ctx }) => {
      const id = pageId((req.params as { id: string }).id);
      const row = await getIdentityById(db, id);
      const rotated = okOrThrow(await callApi(app, req, 'POST', `/api/identities/${id}/rotate-key`));
      const name = row?.name ?? String(id);
      return (
        <Layout ctx={ctx} title="Key rotated" crumbs={crumbs({ label: name, href: `${BASE}/${id}` }, { label: 'Key rotated' })}>
          <ShownOnce title="The old key no longer works." secret={rotated.api_key} what={`The API key of ${name}`} />
          <p>
            <a class="button" href={`${BASE}/${id}`}>
              Back to the identity
            </a>
          </p>
        </Layout>
      );
    },
  });

  // The subject mapping (spec §4 /api/admin-auth/oidc/agents/{identity_id}) through the same API route, so the rules and the audit are one.
  registerConsoleForm(app, api, {
    url: `${BASE}/:id/oidc`,
    summary: 'Map the identity to a single sign-on subject (form: subject, email)',
    permission: 'identities:write',
    schema: z.object({ subject: requiredText(512), email: optionalText(320) }),
    render: (req, ctx, form) => detailOr404(ctx, pageId((req.params as { id: string }).id), { sso: form }),
    handle: async ({ req, reply, body }) => {
      const id = pageId((req.params as { id: string }).id);
      okOrThrow(await callApi(app, req, 'PUT', `/api/admin-auth/oidc/agents/${id}`, { subject: body.subject, email: body.email || null }));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/oidc/remove`,
    summary: "Remove the identity's single sign-on mapping",
    permission: 'identities:write',
    schema: z.object({}),
    render: (req, ctx) => detailOr404(ctx, pageId((req.params as { id: string }).id)),
    handle: async ({ req, reply }) => {
      const id = pageId((req.params as { id: string }).id);
      okOrThrow(await callApi(app, req, 'DELETE', `/api/admin-auth/oidc/agents/${id}`));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/grants`,
    summary: 'Grant an identity a role on a source (form: source_id, role_key, expires_at)',
    permission: 'identities:write',
    schema: grantForm,
    render: (req, ctx, form) => detailOr404(ctx, pageId((req.params as { id: string }).id), { grant: form }),
    handle: async ({ req, reply, body }) => {
      const id = pageId((req.params as { id: string }).id);
      okOrThrow(await callApi(app, req, 'POST', `/api/identities/${id}/grants`, { source_id: body.source_id, role_key: body.role_key, expires_at: body.expires_at || null }));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/grants/:grant_id/revoke`,
    summary: 'Revoke (delete) a grant',
    permission: 'identities:write',
    schema: z.object({}),
    render: (req, ctx) => detailOr404(ctx, pageId((req.params as { id: string }).id)),
    handle: async ({ req, reply }) => {
      const { id, grant_id } = req.params as { id: string; grant_id: string };
      okOrThrow(await callApi(app, req, 'DELETE', `/api/identities/${pageId(id)}/grants/${pageId(grant_id)}`));
      return reply.redirect(`${BASE}/${pageId(id)}`, 303);
    },
  });
}
