// Test helpers for the admin listener: one answer shape, sign-in (session cookie + CSRF token), Bearer calls, admin API tokens, and admin audit capture.
import type { AdminAuditEvent } from '../../src/admin/audit-events.js';
import type { TestService } from './service.js';

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export async function answer(res: Response): Promise<Answer> {
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: parseJson(text) };
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** The `name=value` part of the session cookie a response sets, or null. */
export function sessionCookie(res: { headers: Headers }): string | null {
  for (const line of res.headers.getSetCookie()) {
    const pair = line.split(';')[0]!;
    if (pair.startsWith('gatehouse_session=') && pair !== 'gatehouse_session=') return pair;
  }
  return null;
}

export async function postForm(baseUrl: string, path: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<Answer> {
  return answer(await fetch(baseUrl + path, { method: 'POST', body: new URLSearchParams(form), headers, redirect: 'manual' }));
}

export async function login(baseUrl: string, username: string, password: string, extra: Record<string, string> = {}): Promise<Answer & { cookie: string | null }> {
  const a = await postForm(baseUrl, '/auth/login', { username, password, ...extra });
  return { ...a, cookie: sessionCookie(a) };
}

/** A signed-in browser-like client: cookie plus the CSRF token from /api/session. */
export class AdminClient {
  constructor(
    readonly baseUrl: string,
    public cookie: string,
    public csrf: string,
  ) {}

  static async signIn(baseUrl: string, username: string, password: string): Promise<AdminClient> {
    const a = await login(baseUrl, username, password);
    if (a.status !== 303 || !a.cookie) throw new Error(`sign-in of ${username} failed: ${a.status}`);
    const client = new AdminClient(baseUrl, a.cookie, '');
    const s = await client.request('GET', '/api/session');
    client.csrf = s.json.csrf_token as string;
    return client;
  }

  async request(method: string, path: string, opts: { json?: unknown; csrf?: string | null; headers?: Record<string, string> } = {}): Promise<Answer> {
    const headers: Record<string, string> = { cookie: this.cookie, ...opts.headers };
    const csrf = opts.csrf === undefined ? this.csrf : opts.csrf;
    if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
    if (opts.json !== undefined) headers['content-type'] = 'application/json';
    const a = await answer(await fetch(this.baseUrl + path, { method, headers, body: opts.json === undefined ? null : JSON.stringify(opts.json), redirect: 'manual' }));
    const renewed = sessionCookie(a);
    if (renewed) this.cookie = renewed;
    return a;
  }
}

/**
 * An admin call with a Bearer token (CSRF-exempt). The body is sent as JSON under the default content
 * type; under another one a string goes as is and an object as form fields.
 */
export async function bearer(baseUrl: string, token: string, method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  let payload: string | null = null;
  if (body !== undefined) {
    headers['content-type'] = contentType;
    if (contentType === 'application/json') payload = JSON.stringify(body);
    else payload = typeof body === 'string' ? body : new URLSearchParams(body as Record<string, string>).toString();
  }
  return answer(await fetch(baseUrl + path, { method, headers, body: payload, redirect: 'manual' }));
}

/** Signs in with the form and creates an admin API token for that admin. */
export async function adminToken(adminUrl: string, username: string, password: string, tokenName = 'tests'): Promise<string> {
  const client = await AdminClient.signIn(adminUrl, username, password);
  const created = await client.request('POST', '/api/admin-tokens', { json: { name: tokenName } });
  if (created.status !== 201) throw new Error(`admin token creation failed: ${created.status} ${created.text}`);
  return created.json.token as string;
}

/** Records every admin audit event of a running service (the events still reach the real auditor). */
export function captureAudit(svc: TestService): AdminAuditEvent[] {
  const events: AdminAuditEvent[] = [];
  const auditor = svc.running.services.adminAudit;
  const original = auditor.record.bind(auditor);
  auditor.record = async (event) => {
    events.push(event);
    await original(event);
  };
  return events;
}
