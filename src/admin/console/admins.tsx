// Console pages for admin users (/dashboard/admins: list, create, roles, enable, password, single sign-on subject, delete — changes for owners only) and the signed-in admin's account (/dashboard/account: password, API tokens shown once, sign out).
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { GatehouseError } from '../../errors/registry.js';
import { getAdminUserById, listAdminUsers } from '../../store/repos/admin-users.js';
import { listAdminTokens } from '../../store/repos/admin-tokens.js';
import type { AdminToken } from '../../store/schema.js';
import { adminRoles } from '../auth/permissions.js';
import { adminUsername } from '../auth/admins-api.js';
import type { AdminModuleContext } from '../module.js';
import { callApi, okOrThrow } from './api-call.js';
import { demand, pageContext, sendPage, type PageContext } from './context.js';
import { DataTable } from './data-table.js';
import { checkbox, CheckboxField, ConsoleForm, emptyForm, Field, optionalText, registerConsoleForm, requiredText, type FormState } from './forms.js';
import { CsrfField, Layout } from './layout.js';
import { EnabledBadge, PostButton, ShownOnce, Time, pageId } from './ui.js';

const BASE = '/dashboard/admins';
const ACCOUNT = '/dashboard/account';
const crumbs = (...more: Array<{ label: string; href?: string }>) => [{ label: 'Admins', href: BASE }, ...more];

/** Checkboxes send `roles` once per ticked role: absent, one string, or a list. */
const roleList = z.preprocess((v) => (v === undefined || v === null || v === '' ? [] : Array.isArray(v) ? v : [v]), z.array(z.enum(adminRoles, { error: `Choose among: ${adminRoles.join(', ')}` })).max(adminRoles.length));

const adminCreateForm = z.object({
  username: requiredText(128).pipe(adminUsername),
  password: z.string().min(1, 'This field is required').max(1024),
  roles: roleList,
  must_change_password: checkbox(),
});

const adminEditForm = z.object({
  username: requiredText(128).pipe(adminUsername),
  roles: roleList,
  enabled: checkbox(),
});

const passwordForm = z.object({
  password: z.string().min(1, 'This field is required').max(1024),
  must_change_password: checkbox(),
});

const subjectForm = z.object({ subject: requiredText(512), email: optionalText(320) });

const tokenForm = z.object({ name: requiredText(128), expires_at: optionalText(64) });

/** One checkbox per admin role, all named `roles` (the error of the field under the group). */
function RoleChoices({ form, hint }: { form: FormState; hint?: string }): JSX.Element {
  const chosen = new Set((form.values.roles ?? '').split(',').map((r) => r.trim()));
  const error = form.errors.roles;
  return (
    <fieldset class={error ? 'field has-error' : 'field'} aria-describedby={error ? 'f-roles-error' : undefined}>
      <legend>Roles</legend>
      {hint ? (
        <p class="hint" safe>
          {hint}
        </p>
      ) : (
        ''
      )}
      {adminRoles.map((r) => (
        <div class="field checkbox">
          <input id={`f-roles-${r}`} name="roles" type="checkbox" value={r} checked={chosen.has(r)} />
          <label for={`f-roles-${r}`}>{r}</label>
        </div>
      ))}
      {error ? (
        <p class="field-error" id="f-roles-error" safe>
          {error}
        </p>
      ) : (
        ''
      )}
    </fieldset>
  );
}

/** API tokens as a table; `revoke` names the form that deletes one (absent: no buttons). */
function TokenTable({ ctx, tokens, revoke }: { ctx: PageContext; tokens: AdminToken[]; revoke?: (t: AdminToken) => string }): JSX.Element {
  return (
    <DataTable
      rows={tokens}
      empty="No API tokens."
      columns={[
        { label: 'Name', text: (t) => t.name },
        { label: 'Created', cell: (t) => <Time value={t.created_at} /> },
        { label: 'Last used', cell: (t) => (t.last_used_at ? <Time value={t.last_used_at} /> : 'never') },
        { label: 'Expires', cell: (t) => (t.expires_at ? <Time value={t.expires_at} /> : 'never') },
        { label: 'Actions', show: revoke !== undefined, cell: (t) => <PostButton ctx={ctx} action={revoke!(t)} label="Revoke" variant="danger" /> },
      ]}
    />
  );
}

export function registerAdminPages({ app, api, services }: AdminModuleContext): void {
  const db = services.db;
  const issuer = services.config.auth.oidc.issuer_url;

  // ---- the list and create (owners create)

  api.describe({ method: 'GET', url: BASE, summary: 'Admin users page', tags: ['console'], produces: ['text/html'] });
  app.get(BASE, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'admins:read');
    const rows = await listAdminUsers(db);
    return sendPage(
      reply,
      <Layout ctx={ctx} title="Admins" crumbs={crumbs()} actions={ctx.can('admins:manage') ? <a class="button" href={`${BASE}/new`}>New admin</a> : ''}>
        <p>Only owners change admin accounts (docs/admin-roles.md).</p>
        <DataTable
          rows={rows}
          empty="No admins."
          columns={[
            { label: 'Username', cell: (a) => <a href={`${BASE}/${a.id}`} safe>{a.username}</a> },
            { label: 'Roles', text: (a) => a.roles.join(', ') || 'none' },
            { label: 'State', cell: (a) => <EnabledBadge enabled={a.enabled} /> },
            { label: 'Single sign-on', text: (a) => a.oidc_subject ?? 'not mapped' },
            { label: 'Last sign-in', cell: (a) => (a.last_login_at ? <Time value={a.last_login_at} /> : 'never') },
          ]}
        />
      </Layout>,
    );
  });

  const newPage = (ctx: PageContext, form: FormState) => (
    <Layout ctx={ctx} title="New admin" crumbs={crumbs({ label: 'New admin' })}>
      <ConsoleForm ctx={ctx} form={form} action={`${BASE}/create`} submit="Create admin">
        <Field form={form} name="username" label="Username" required maxlength={128} autocomplete="off" hint="Letters, digits and . _ @ + -." />
        <Field form={form} name="password" label="Initial password" type="password" required autocomplete="new-password" hint="At least 12 characters, not the username." />
        <CheckboxField form={form} name="must_change_password" label="Must choose a new password at first sign-in" checked />
        <RoleChoices form={form} hint="owner: everything, admin accounts included; admin: everything else; approver: read and decide approvals; auditor: read and the audit log; viewer: read." />
      </ConsoleForm>
    </Layout>
  );

  api.describe({ method: 'GET', url: `${BASE}/new`, summary: 'The admin create form (owners)', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/new`, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'admins:manage');
    return sendPage(reply, newPage(ctx, emptyForm({ roles: 'viewer', must_change_password: 'on' })));
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/create`,
    summary: 'Create an admin user (form: username, password, roles, must_change_password; owners)',
    permission: 'admins:manage',
    schema: adminCreateForm,
    render: (_req, ctx, form) => newPage(ctx, { ...form, values: { must_change_password: '', ...form.values } }),
    handle: async ({ req, reply, body }) => {
      const created = okOrThrow(await callApi(app, req, 'POST', '/api/admins', { username: body.username, password: body.password, roles: body.roles, must_change_password: body.must_change_password }));
      return reply.redirect(`${BASE}/${created.id}`, 303);
    },
  });

  // ---- one admin

  type Forms = { edit?: FormState; password?: FormState; sso?: FormState };
  const detailPage = async (ctx: PageContext, id: number, forms: Forms = {}) => {
    demand(ctx, 'admins:read');
    const a = await getAdminUserById(db, id);
    if (!a) throw new GatehouseError('not_found', 'There is no such admin.');
    const manage = ctx.can('admins:manage');
    const tokens = manage ? await listAdminTokens(db, a.id) : [];
    const edit = forms.edit ?? emptyForm({ username: a.username, roles: a.roles.join(', '), enabled: a.enabled ? 'on' : '' });
    const password = forms.password ?? emptyForm({ must_change_password: 'on' });
    const sso = forms.sso ?? emptyForm({ subject: a.oidc_subject ?? '', email: a.oidc_email ?? '' });
    return (
      <Layout ctx={ctx} title={`Admin ${a.username}`} crumbs={crumbs({ label: a.username })}>
        <dl class="props">
          <dt>Id</dt>
          <dd>{a.id}</dd>
          <dt>Roles</dt>
          <dd safe>{a.roles.join(', ') || 'none'}</dd>
          <dt>State</dt>
          <dd>
            <EnabledBadge enabled={a.enabled} />
          </dd>
          <dt>Must change password</dt>
          <dd>{a.must_change_password ? 'yes' : 'no'}</dd>
          <dt>Single sign-on subject</dt>
          <dd safe>{a.oidc_subject === null ? 'not mapped' : `${a.oidc_subject} (${a.oidc_issuer ?? ''})`}</dd>
          <dt>Single sign-on email</dt>
          <dd safe>{a.oidc_email ?? ''}</dd>
          <dt>Created</dt>
          <dd>
            <Time value={a.created_at} />
          </dd>
          <dt>Last sign-in</dt>
          <dd>{a.last_login_at ? <Time value={a.last_login_at} /> : 'never'}</dd>
        </dl>
        {manage ? (
          <>
            <h2>Roles and state</h2>
            <p>A changed username, role set or state ends the admin's sessions at once.</p>
            <ConsoleForm ctx={ctx} form={edit} action={`${BASE}/${a.id}/update`} submit="Save changes">
              <Field form={edit} name="username" label="Username" required maxlength={128} />
              <RoleChoices form={edit} />
              <CheckboxField form={edit} name="enabled" label="Enabled" />
            </ConsoleForm>
            <h2>Set a password</h2>
            <ConsoleForm ctx={ctx} form={password} action={`${BASE}/${a.id}/password`} submit="Set password">
              <Field form={password} name="password" label="New password" type="password" required autocomplete="new-password" />
              <CheckboxField form={password} name="must_change_password" label="Must choose a new password at next sign-in" />
            </ConsoleForm>
            <h2>Single sign-on</h2>
            <p safe>
              {issuer === null
                ? 'No issuer is configured (auth.oidc.issuer_url): there is no subject to map yet.'
                : `The subject of this admin at ${issuer}. Sign-in finds the admin by this subject only, never by email; a change ends the admin's sessions.`}
            </p>
            <ConsoleForm ctx={ctx} form={sso} action={`${BASE}/${a.id}/oidc`} submit="Save mapping">
              <Field form={sso} name="subject" label="Subject" required maxlength={512} />
              <Field form={sso} name="email" label="Email" type="email" maxlength={320} hint="Informational only." />
            </ConsoleForm>
            {a.oidc_subject !== null ? (
              <div class="form-actions">
                <PostButton ctx={ctx} action={`${BASE}/${a.id}/oidc/remove`} label="Remove mapping" variant="danger" />
              </div>
            ) : (
              ''
            )}
            <h2>API tokens</h2>
            <TokenTable ctx={ctx} tokens={tokens} revoke={(t) => `${BASE}/${a.id}/tokens/${t.id}/revoke`} />
            <h2>Delete</h2>
            <div class="form-actions">
              <PostButton ctx={ctx} action={`${BASE}/${a.id}/delete`} label="Delete admin" variant="danger" />
            </div>
          </>
        ) : (
          ''
        )}
      </Layout>
    );
  };

  const idOf = (req: FastifyRequest) => pageId((req.params as { id: string }).id);

  api.describe({ method: 'GET', url: `${BASE}/:id`, summary: 'One admin user: roles, state, single sign-on subject, tokens (changes for owners)', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/:id`, async (req, reply) => sendPage(reply, await detailPage(pageContext(req), idOf(req))));

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/update`,
    summary: "Change an admin's username, roles and enabled state (owners)",
    permission: 'admins:manage',
    schema: adminEditForm,
    render: (req, ctx, form) => detailPage(ctx, idOf(req), { edit: { ...form, values: { enabled: '', ...form.values } } }),
    handle: async ({ req, reply, body }) => {
      const id = idOf(req);
      okOrThrow(await callApi(app, req, 'PATCH', `/api/admins/${id}`, { username: body.username, roles: body.roles, enabled: body.enabled }));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/password`,
    summary: "Set an admin's password (owners); ends the admin's sessions",
    permission: 'admins:manage',
    schema: passwordForm,
    render: (req, ctx, form) => detailPage(ctx, idOf(req), { password: { ...form, values: { must_change_password: '', ...form.values } } }),
    handle: async ({ req, reply, body }) => {
      const id = idOf(req);
      okOrThrow(await callApi(app, req, 'PATCH', `/api/admins/${id}`, { password: body.password, must_change_password: body.must_change_password }));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  // The subject mapping (spec §4 /api/admin-auth/oidc/admins/{admin_id}) through the same API route, so the rules, the audit and the authorization-version bump are one.
  registerConsoleForm(app, api, {
    url: `${BASE}/:id/oidc`,
    summary: 'Map the admin to a single sign-on subject (form: subject, email; owners)',
    permission: 'admins:manage',
    schema: subjectForm,
    render: (req, ctx, form) => detailPage(ctx, idOf(req), { sso: form }),
    handle: async ({ req, reply, body }) => {
      const id = idOf(req);
      okOrThrow(await callApi(app, req, 'PUT', `/api/admin-auth/oidc/admins/${id}`, { subject: body.subject, email: body.email || null }));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/oidc/remove`,
    summary: "Remove the admin's single sign-on mapping (owners)",
    permission: 'admins:manage',
    schema: z.object({}),
    render: (req, ctx) => detailPage(ctx, idOf(req)),
    handle: async ({ req, reply }) => {
      const id = idOf(req);
      okOrThrow(await callApi(app, req, 'DELETE', `/api/admin-auth/oidc/admins/${id}`));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/tokens/:token_id/revoke`,
    summary: "Revoke one of an admin's API tokens (owners)",
    permission: 'admins:manage',
    schema: z.object({}),
    render: (req, ctx) => detailPage(ctx, idOf(req)),
    handle: async ({ req, reply }) => {
      const id = idOf(req);
      const tokenId = pageId((req.params as { token_id: string }).token_id);
      // Only a token of this admin: the page named it, the form must not reach another's.
      if (!(await listAdminTokens(db, id)).some((t) => t.id === tokenId)) throw new GatehouseError('not_found', 'This admin has no such token.');
      okOrThrow(await callApi(app, req, 'DELETE', `/api/admin-tokens/${tokenId}`));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/delete`,
    summary: 'Delete an admin user and its API tokens (owners)',
    permission: 'admins:manage',
    schema: z.object({}),
    render: (req, ctx) => detailPage(ctx, idOf(req)),
    handle: async ({ req, reply }) => {
      okOrThrow(await callApi(app, req, 'DELETE', `/api/admins/${idOf(req)}`));
      return reply.redirect(BASE, 303);
    },
  });

  // ---- the signed-in admin's account

  const accountPage = async (ctx: PageContext, token: FormState = emptyForm()) => {
    const me = ctx.admin!;
    const tokens = await listAdminTokens(db, me.id);
    return (
      <Layout ctx={ctx} title="Your account" crumbs={[{ label: 'Account' }]}>
        <dl class="props">
          <dt>Username</dt>
          <dd safe>{me.username}</dd>
          <dt>Roles</dt>
          <dd safe>{me.roles.join(', ') || 'none'}</dd>
          <dt>Signed in with</dt>
          <dd>{me.via === 'token' ? 'an API token' : 'a browser session'}</dd>
        </dl>
        <div class="form-actions">
          <a class="button secondary" href="/auth/change-password">
            Change password
          </a>
          {ctx.csrf ? (
            <form method="post" action="/auth/logout" class="inline-form">
              <CsrfField ctx={ctx} />
              <button type="submit" class="button secondary">
                Sign out
              </button>
            </form>
          ) : (
            ''
          )}
        </div>
        <h2>API tokens</h2>
        <p>A token acts as you, with your roles, without a browser session (Authorization: Bearer …). It is shown once when created.</p>
        <TokenTable ctx={ctx} tokens={tokens} revoke={(t) => `${ACCOUNT}/tokens/${t.id}/revoke`} />
        <h3>Create a token</h3>
        <ConsoleForm ctx={ctx} form={token} action={`${ACCOUNT}/tokens`} submit="Create token">
          <Field form={token} name="name" label="Token name" required maxlength={128} hint="What it is for, e.g. deploy pipeline." />
          <Field form={token} name="expires_at" label="Expires at" hint="Optional, ISO 8601 with a time zone (e.g. 2026-12-31T23:59:00Z); empty: never." />
        </ConsoleForm>
      </Layout>
    );
  };

  api.describe({ method: 'GET', url: ACCOUNT, summary: "The signed-in admin's account: password, API tokens, sign out", tags: ['console'], produces: ['text/html'] });
  app.get(ACCOUNT, async (req, reply) => sendPage(reply, await accountPage(pageContext(req))));

  registerConsoleForm(app, api, {
    url: `${ACCOUNT}/tokens`,
    summary: 'Create an API token for yourself (form: name, expires_at); the token is shown once on the answer page',
    permission: null,
    schema: tokenForm,
    render: (_req, ctx, form) => accountPage(ctx, form),
    handle: async ({ req, reply, ctx, body }) => {
      const created = okOrThrow(await callApi(app, req, 'POST', '/api/admin-tokens', { name: body.name, ...(body.expires_at ? { expires_at: body.expires_at } : {}) }));
      void reply.code(201);
      return (
        <Layout ctx={ctx} title="Token created" crumbs={[{ label: 'Account', href: ACCOUNT }, { label: 'Token created' }]}>
          <ShownOnce title={`Token ${created.name} created.`} secret={created.token} what={`The token ${created.name}`} />
          <p>
            <a class="button" href={ACCOUNT}>
              Back to your account
            </a>
          </p>
        </Layout>
      );
    },
  });

  registerConsoleForm(app, api, {
    url: `${ACCOUNT}/tokens/:token_id/revoke`,
    summary: 'Revoke one of your API tokens',
    permission: null,
    schema: z.object({}),
    render: (_req, ctx) => accountPage(ctx),
    handle: async ({ req, reply, ctx }) => {
      const tokenId = pageId((req.params as { token_id: string }).token_id);
      // One's own only, even for an owner (who revokes others' tokens on their admin page).
      if (!(await listAdminTokens(db, ctx.admin!.id)).some((t) => t.id === tokenId)) throw new GatehouseError('not_found', 'You have no such token.');
      okOrThrow(await callApi(app, req, 'DELETE', `/api/admin-tokens/${tokenId}`));
      return reply.redirect(ACCOUNT, 303);
    },
  });
}
