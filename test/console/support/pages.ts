// HTTP helpers for console tests: a signed-in browser-like client that gets pages (Accept: text/html) and posts form-encoded bodies with or without the CSRF token.
import { AdminClient, answer, type Answer } from '../../support/admin-client.js';

export const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

export class ConsoleClient {
  constructor(readonly admin: AdminClient) {}

  static async signIn(baseUrl: string, username: string, password: string): Promise<ConsoleClient> {
    return new ConsoleClient(await AdminClient.signIn(baseUrl, username, password));
  }

  get baseUrl(): string {
    return this.admin.baseUrl;
  }

  async get(path: string, headers: Record<string, string> = {}): Promise<Answer> {
    return answer(await fetch(this.baseUrl + path, { headers: { cookie: this.admin.cookie, accept: BROWSER_ACCEPT, ...headers }, redirect: 'manual' }));
  }

  /** A form post as a browser sends it; `csrf: false` leaves the token out. */
  async post(path: string, form: Record<string, string | string[]>, opts: { csrf?: boolean; accept?: string } = {}): Promise<Answer> {
    const body = new URLSearchParams();
    for (const [k, v] of Object.entries(form)) for (const one of Array.isArray(v) ? v : [v]) body.append(k, one);
    if (opts.csrf !== false) body.set('csrf_token', this.admin.csrf);
    return answer(await fetch(this.baseUrl + path, { method: 'POST', body, headers: { cookie: this.admin.cookie, accept: opts.accept ?? BROWSER_ACCEPT }, redirect: 'manual' }));
  }
}

/** The text of the field error shown for `name`, or null. */
export function fieldError(html: string, name: string): string | null {
  const m = new RegExp(`<p class="field-error" id="f-${name}-error">([^<]*)</p>`).exec(html);
  return m ? m[1]! : null;
}

/** The value attribute of the input named `name`, or null. */
export function inputValue(html: string, name: string): string | null {
  const m = new RegExp(`<input id="f-${name}" name="${name}"[^>]* value="([^"]*)"`).exec(html);
  return m ? m[1]! : null;
}

/** The world's owner and a new viewer, both signed in as browsers (the viewer's username and password given). */
export async function ownerAndViewer(world: { svc: { adminUrl: string }; admin(method: string, path: string, json?: unknown): Promise<Answer> }, ownerPassword: string, viewer = { username: 'viewer1', password: 'viewer-password-0001' }): Promise<{ owner: ConsoleClient; viewer: ConsoleClient }> {
  const owner = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', ownerPassword);
  const made = await world.admin('POST', '/api/admins', { username: viewer.username, password: viewer.password, roles: ['viewer'], must_change_password: false });
  if (made.status !== 201) throw new Error(`creating ${viewer.username}: ${made.status} ${made.text}`);
  return { owner, viewer: await ConsoleClient.signIn(world.svc.adminUrl, viewer.username, viewer.password) };
}
