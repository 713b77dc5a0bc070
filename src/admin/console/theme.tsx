// POST /dashboard/theme (spec §2 "Console form bodies": theme, next): keeps light, dark or system in a cookie every page applies; `next` is a local path only.
import { z } from 'zod';
import type { AdminModuleContext } from '../module.js';
import { safeNext } from '../auth/pages.js';
import { THEME_COOKIE, THEMES } from './context.js';
import { choice, ConsoleForm, optionalText, registerConsoleForm, SelectField } from './forms.js';
import { Hidden, Layout } from './layout.js';

export const themeForm = z.object({
  theme: choice(THEMES),
  next: optionalText(2048).transform((v) => v || '/dashboard/overview'),
});

const ONE_YEAR_SECONDS = 365 * 24 * 3600;

export function registerThemeRoute({ app, api, services }: AdminModuleContext): void {
  const secure = services.config.admin.cookie.secure;
  registerConsoleForm(app, api, {
    url: '/dashboard/theme',
    summary: 'Console theme (form: theme light|dark|system, next default /dashboard/overview); 303 to `next` when it is a local path',
    permission: null,
    schema: themeForm,
    render: (_req, ctx, form) => (
      <Layout ctx={ctx} title="Theme">
        <ConsoleForm ctx={ctx} form={form} action="/dashboard/theme" submit="Apply">
          <SelectField form={form} name="theme" label="Theme" value={ctx.theme} options={[['system', 'System'], ['light', 'Light'], ['dark', 'Dark']]} />
          <Hidden name="next" value={safeNext(form.values.next)} />
        </ConsoleForm>
      </Layout>
    ),
    handle: async ({ reply, body }) => {
      void reply.setCookie(THEME_COOKIE, body.theme, { path: '/', httpOnly: true, sameSite: 'lax', secure, maxAge: ONE_YEAR_SECONDS });
      return reply.redirect(safeNext(body.next), 303);
    },
  });
}
