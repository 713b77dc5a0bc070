// The sign-in and change-password pages, on the console layout (src/admin/console/layout.tsx), and the rule for where a form may send the browser next.
import type { PageContext } from '../console/context.js';
import { BareLayout, Hidden, Layout } from '../console/layout.js';
import { ConsoleForm, emptyForm, Field, type FormState } from '../console/forms.js';

function NextField({ next }: { next: string | undefined }): JSX.Element {
  return next ? <Hidden name="next" value={next} /> : '';
}

export function loginPage(opts: { ctx: PageContext; form?: FormState; next?: string; sso?: boolean }): JSX.Element {
  const form = opts.form ?? emptyForm();
  const next = opts.next ?? form.values.next;
  // With single sign-on on (auth.oidc.enabled), the provider is offered first (docs/admin-auth.md "Single sign-on").
  const ssoHref = `/auth/oidc/login${next ? `?next=${encodeURIComponent(next)}` : ''}`;
  return (
    <BareLayout title="Sign in to Gatehouse" theme={opts.ctx.theme}>
      {opts.sso ? (
        <p>
          <a id="sso" class="button" href={ssoHref}>
            Sign in with single sign-on
          </a>
        </p>
      ) : (
        ''
      )}
      <form method="post" action="/auth/login" class="console-form">
        {form.message ? (
          <p class="form-error" role="alert" safe>
            {form.message}
          </p>
        ) : (
          ''
        )}
        <Field form={form} name="username" label="Username" autocomplete="username" required maxlength={128} />
        <Field form={form} name="password" label="Password" type="password" autocomplete="current-password" required maxlength={1024} />
        <NextField next={opts.next ?? form.values.next} />
        <div class="form-actions">
          <button type="submit" class="button">
            Sign in
          </button>
        </div>
      </form>
    </BareLayout>
  );
}

export function changePasswordPage(opts: { ctx: PageContext; form?: FormState; next?: string }): JSX.Element {
  const { ctx } = opts;
  const form = opts.form ?? emptyForm();
  const forced = ctx.admin?.mustChangePassword ?? false;
  const body = (
    <>
      {forced ? <p class="notice">This account still has its initial password. Choose a new one before continuing.</p> : ''}
      <ConsoleForm ctx={ctx} form={form} action="/auth/change-password" submit="Change password">
        <NextField next={opts.next ?? form.values.next} />
        <Field form={form} name="current_password" label="Current password" type="password" autocomplete="current-password" required />
        <Field form={form} name="new_password" label="New password" hint="At least 12 characters, not the username, not the current password." type="password" autocomplete="new-password" required />
        <Field form={form} name="confirm_password" label="Repeat the new password" type="password" autocomplete="new-password" required />
      </ConsoleForm>
    </>
  );
  return (
    <Layout ctx={ctx} title="Change password" crumbs={[{ label: 'Change password' }]}>
      {body}
    </Layout>
  );
}

/** `next` only when it is a same-origin path: one leading slash, no scheme, no backslash, no control characters. */
export function safeNext(next: unknown, fallback = '/dashboard/overview'): string {
  if (typeof next !== 'string' || next.length === 0 || next.length > 2048) return fallback;
  if (!next.startsWith('/') || next.startsWith('//') || next.includes('\\')) return fallback;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(next)) return fallback;
  return next;
}

/** A refused single sign-on (docs/admin-auth.md "Admin sign-in with single sign-on"): one sentence saying why, and the way back. */
export function oidcRefusalPage(opts: { ctx: PageContext; message: string }): JSX.Element {
  return (
    <BareLayout title="Single sign-on refused" theme={opts.ctx.theme}>
      <p class="form-error" role="alert" safe>
        {opts.message}
      </p>
      <p>
        <a href="/auth/login">Back to the sign-in page</a>
      </p>
    </BareLayout>
  );
}
