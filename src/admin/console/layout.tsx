// The console layout: one page frame with the left navigation, breadcrumbs, the signed-in admin's name and roles, the theme form and sign-out; and the bare frame of the sign-in pages.
import { escapeHtml } from '@kitajs/html';
import { assetUrl } from './assets.js';
import type { PageContext } from './context.js';
import { currentEntry, visibleNav } from './nav.js';

export interface Crumb {
  label: string;
  /** Omitted for the current page (the last crumb). */
  href?: string;
}

export interface LayoutProps {
  ctx: PageContext;
  title: string;
  /** Crumbs after "Console"; the last is the current page. Defaults to the title alone. */
  crumbs?: Crumb[];
  /** Buttons or links shown beside the page heading (already permission-filtered by the page). */
  actions?: JSX.Element;
  /** Vendored scripts this page needs besides htmx and console.js (loaded before console.js, which draws with them). */
  scripts?: ReadonlyArray<'uPlot.min.js'>;
  children?: JSX.Element | JSX.Element[];
}

const SCRIPT_STYLES: Record<string, string> = { 'uPlot.min.js': 'uPlot.min.css' };

function Head({ title, scripts = [] }: { title: string; scripts?: ReadonlyArray<'uPlot.min.js'> }): JSX.Element {
  return (
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <meta name="referrer" content="same-origin" />
      <meta name="color-scheme" content="light dark" />
      {/* htmx would otherwise inject an inline <style>, which the CSP refuses. */}
      <meta name="htmx-config" content='{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false}' />
      <title safe>{title} · Gatehouse</title>
      <link rel="stylesheet" href={assetUrl('console.css')} />
      {scripts.map((name) => (SCRIPT_STYLES[name] ? <link rel="stylesheet" href={assetUrl(SCRIPT_STYLES[name])} /> : ''))}
      <script src={assetUrl('htmx.min.js')} defer></script>
      {scripts.map((name) => (
        <script src={assetUrl(name)} defer></script>
      ))}
      <script src={assetUrl('console.js')} defer></script>
    </head>
  );
}

/** A hidden field; the value is escaped whole (see attrValue in forms.tsx). */
export function Hidden({ name, value }: { name: string; value: string }): JSX.Element {
  return <input type="hidden" name={name} value={escapeHtml(value)} />;
}

/** The CSRF field every mutating console form carries (the guard checks `csrf_token` on every POST). */
export function CsrfField({ ctx }: { ctx: PageContext }): JSX.Element {
  return <Hidden name="csrf_token" value={ctx.csrf} />;
}

function ThemeForm({ ctx }: { ctx: PageContext }): JSX.Element {
  return (
    <form method="post" action="/dashboard/theme" class="theme-form">
      <CsrfField ctx={ctx} />
      <Hidden name="next" value={ctx.returnTo} />
      <label for="theme-select">Theme</label>
      <select id="theme-select" name="theme">
        <option value="system" selected={ctx.theme === 'system'}>System</option>
        <option value="light" selected={ctx.theme === 'light'}>Light</option>
        <option value="dark" selected={ctx.theme === 'dark'}>Dark</option>
      </select>
      <button type="submit" class="button secondary small">Apply</button>
    </form>
  );
}

function Breadcrumbs({ crumbs }: { crumbs: Crumb[] }): JSX.Element {
  return (
    <nav aria-label="Breadcrumb" class="breadcrumbs">
      <ol>
        <li>
          <a href="/dashboard/overview">Console</a>
        </li>
        {crumbs.map((c, i) =>
          c.href && i < crumbs.length - 1 ? (
            <li>
              <a href={c.href} safe>
                {c.label}
              </a>
            </li>
          ) : (
            <li aria-current="page" safe>
              {c.label}
            </li>
          ),
        )}
      </ol>
    </nav>
  );
}

export function Layout({ ctx, title, crumbs, actions, scripts, children }: LayoutProps): JSX.Element {
  const admin = ctx.admin;
  const current = currentEntry(ctx.path);
  const nav = admin && !admin.mustChangePassword ? visibleNav(ctx.can) : [];
  return (
    <html lang="en" data-theme={ctx.theme}>
      <Head title={title} scripts={scripts ?? []} />
      <body>
        <a class="skip-link" href="#main">
          Skip to content
        </a>
        <header class="topbar">
          <a class="brand" href="/dashboard/overview">
            Gatehouse
          </a>
          {admin ? (
            <div class="whoami">
              <span class="who">
                Signed in as <strong safe>{admin.username}</strong>{' '}
                <span class="roles" safe>
                  ({admin.roles.join(', ') || 'no roles'})
                </span>
              </span>
              <ThemeForm ctx={ctx} />
              {ctx.csrf ? (
                <form method="post" action="/auth/logout" class="logout-form">
                  <CsrfField ctx={ctx} />
                  <button type="submit" class="button secondary small">
                    Sign out
                  </button>
                </form>
              ) : (
                ''
              )}
            </div>
          ) : (
            ''
          )}
        </header>
        <div class="frame">
          {nav.length > 0 ? (
            <nav aria-label="Main" class="sidenav">
              <ul>
                {nav.map((e) => (
                  <li>
                    <a href={e.href} aria-current={current?.href === e.href ? 'page' : undefined} safe>
                      {e.label}
                    </a>
                  </li>
                ))}
              </ul>
            </nav>
          ) : (
            ''
          )}
          <main id="main" tabindex="-1">
            <Breadcrumbs crumbs={crumbs ?? [{ label: title }]} />
            <div class="page-head">
              <h1 safe>{title}</h1>
              {actions ? <div class="page-actions">{actions}</div> : ''}
            </div>
            {children ?? ''}
          </main>
        </div>
      </body>
    </html>
  );
}

/** The frame of the pages shown before sign-in: no navigation, the form centred. */
export function BareLayout({ title, theme, children }: { title: string; theme: PageContext['theme']; children?: JSX.Element | JSX.Element[] }): JSX.Element {
  return (
    <html lang="en" data-theme={theme}>
      <Head title={title} />
      <body class="bare">
        <main id="main" class="card narrow">
          <p class="brand">Gatehouse</p>
          <h1 safe>{title}</h1>
          {children ?? ''}
        </main>
      </body>
    </html>
  );
}
