// What every console page is rendered with: the signed-in admin, its CSRF token, permissions, the theme cookie and the current path.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sessionOf } from '../auth/guard.js';
import type { AdminPrincipal } from '../auth/principal.js';
import { hasPermission, type Permission } from '../auth/permissions.js';
import { GatehouseError } from '../../errors/registry.js';
import { currentEntry } from './nav.js';

export const THEMES = ['light', 'dark', 'system'] as const;
export type Theme = (typeof THEMES)[number];
export const THEME_COOKIE = 'gatehouse_theme';

export interface PageContext {
  /** null on the public pages (sign-in). */
  admin: AdminPrincipal | null;
  /** The session's CSRF token ('' for token-authenticated or anonymous requests: they render no forms that need it). */
  csrf: string;
  theme: Theme;
  /** The request path without its query (for the active navigation entry and the theme form's `next`). */
  path: string;
  /** The full request URL (path and query), local. */
  url: string;
  /** Where a form in the layout (the theme) sends the browser back: this page for a GET, else the section's list. */
  returnTo: string;
  can(permission: Permission): boolean;
}

export function themeOf(req: FastifyRequest): Theme {
  const raw = req.cookies?.[THEME_COOKIE];
  return (THEMES as readonly string[]).includes(raw ?? '') ? (raw as Theme) : 'system';
}

export function pageContext(req: FastifyRequest): PageContext {
  const admin = req.admin ?? null;
  const url = req.url;
  const q = url.indexOf('?');
  const path = q >= 0 ? url.slice(0, q) : url;
  return {
    admin,
    csrf: sessionOf(req)?.record.csrf_token ?? '',
    theme: themeOf(req),
    path,
    url,
    returnTo: req.method === 'GET' ? url : (currentEntry(path)?.href ?? '/dashboard/overview'),
    can: (p) => admin !== null && hasPermission(admin.roles, p),
  };
}

/** Refuses a page or form the admin's roles do not allow (403 `forbidden`; browsers get it as a page). */
export function demand(ctx: PageContext, permission: Permission): void {
  if (!ctx.can(permission)) {
    throw new GatehouseError('forbidden', `This needs the permission ${permission}, which none of your roles (${ctx.admin?.roles.join(', ') || 'none'}) grants.`);
  }
}

/** Sends a rendered page: doctype, HTML type, never cached (pages show live state and carry the CSRF token). */
export async function sendPage(reply: FastifyReply, html: JSX.Element, status?: number): Promise<FastifyReply> {
  const body = await html;
  return reply.code(status ?? reply.statusCode).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(`<!doctype html>\n${body}`);
}

/** True when the caller asked for a page: a browser (Accept names text/html) rather than an API client. */
export function wantsHtml(req: FastifyRequest): boolean {
  const accept = req.headers.accept ?? '';
  return accept.includes('text/html');
}

/** True when the caller asked for JSON only (Accept: application/json without text/html), or sent JSON. */
export function wantsJson(req: FastifyRequest): boolean {
  if ((req.headers['content-type'] ?? '').startsWith('application/json')) return true;
  const accept = req.headers.accept ?? '';
  return accept.includes('application/json') && !accept.includes('text/html');
}

/** A browser that wants a page back (not a JSON caller): console form endpoints answer it with a redirect or a page. */
export function wantsPage(req: FastifyRequest): boolean {
  return !wantsJson(req) && (wantsHtml(req) || req.headers['hx-request'] === 'true');
}
