// Test helpers: an admin API client on global fetch with manual cookie handling, and audit capture.
import type { AdminAuditEvent } from '../../../src/admin/audit-events.js';
import type { TestService } from '../../support/service.js';
import { dropRedisPrefix } from '../../support/redis.js';

export const OWNER_PASSWORD = 'owner-password-for-tests-1';

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function answer(res: Response): Promise<Answer> {
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, text, json };
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
  const res = await fetch(baseUrl + path, { method: 'POST', body: new URLSearchParams(form), headers, redirect: 'manual' });
  return answer(res);
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
    const res = await fetch(this.baseUrl + path, {
      method,
      headers,
      body: opts.json === undefined ? null : JSON.stringify(opts.json),
      redirect: 'manual',
    });
    const a = await answer(res);
    const renewed = sessionCookie(a);
    if (renewed) this.cookie = renewed;
    return a;
  }
}

export async function bearer(baseUrl: string, token: string, method: string, path: string, json?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (json !== undefined) headers['content-type'] = 'application/json';
  return answer(await fetch(baseUrl + path, { method, headers, body: json === undefined ? null : JSON.stringify(json), redirect: 'manual' }));
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

/** Stops a test service; the service fixture sweeps the Redis keys under the prefix it made. */
export async function stopAndClean(svc: TestService): Promise<void> {
  await svc.stop();
}

export { dropRedisPrefix };
