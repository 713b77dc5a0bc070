// Test fixture for gateway suites: a running service, an owner's admin API token, and builders for sources, identities, grants and policies through the real admin API.
import { request as httpRequest } from 'node:http';
import type { AdminAuditEvent } from '../../src/admin/audit-events.js';
import { startTestService, type TestService, type TestServiceOptions } from './service.js';
import { adminToken, answer, bearer, captureAudit, parseJson, type Answer } from './admin-client.js';

export { adminToken, answer, type Answer };

export const OWNER_PASSWORD = 'world-owner-password-0001';

/** Signs in as the bootstrap owner and creates an admin API token (Bearer, CSRF-exempt). */
export function ownerToken(adminUrl: string, password = OWNER_PASSWORD): Promise<string> {
  return adminToken(adminUrl, 'admin', password);
}

export interface World {
  svc: TestService;
  token: string;
  /** Every admin audit event the service recorded, from its start (the owner's sign-in included). */
  audits: AdminAuditEvent[];
  admin(method: string, path: string, json?: unknown): Promise<Answer>;
  /** An HTTP source on `baseUrl` with the default roles (reader, writer, admin). */
  httpSource(sourceId: string, baseUrl: string, config?: Record<string, unknown>): Promise<void>;
  /** A new identity and its key, granted `roleKey` on `sourceId` when given. */
  agent(name: string, grants?: Array<{ source_id: string; role_key: string; expires_at?: string }>, extra?: Record<string, unknown>): Promise<{ id: number; key: string }>;
  policy(body: { name: string; priority?: number; conditions: unknown; actions: unknown }): Promise<number>;
  /** A request through the gateway's proxy with the agent's key. */
  proxy(key: string | null, method: string, pathAndQuery: string, init?: { body?: string | Buffer; headers?: Record<string, string> }): Promise<Answer>;
  /** The request target sent byte for byte (fetch would normalize dot segments and encodings away). */
  rawProxy(key: string | null, method: string, rawTarget: string, init?: { body?: string; headers?: Record<string, string> }): Promise<Answer>;
  stop(): Promise<void>;
}

export async function startWorld(opts: TestServiceOptions & { privateSources?: string[] } = {}): Promise<World> {
  const env: Record<string, string> = { SERVICE_ADMIN__BOOTSTRAP_PASSWORD: OWNER_PASSWORD, ...opts.env };
  if (opts.privateSources) {
    // The caller's own list (env) is kept beside the world's sources.
    const listed = [...opts.privateSources, ...(opts.env?.SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES?.split(',') ?? [])];
    env.SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES = listed.join(',');
  }
  const svc = await startTestService({ ...opts, env });
  const audits = captureAudit(svc);
  let token: string;
  try {
    token = await ownerToken(svc.adminUrl);
  } catch (err) {
    await svc.stop();
    throw err;
  }
  const admin: World['admin'] = (method, path, json) => bearer(svc.adminUrl, token, method, path, json);
  const expectOk = (a: Answer, what: string) => {
    if (a.status >= 300) throw new Error(`${what}: ${a.status} ${a.text}`);
    return a;
  };
  return {
    svc,
    token,
    audits,
    admin,
    async httpSource(sourceId, baseUrl, config = {}) {
      expectOk(
        await admin('POST', '/api/data-sources', { name: sourceId, source_id: sourceId, source_type: 'http', connection_config: { base_url: baseUrl, ...config }, create_default_roles: true }),
        'create source',
      );
      // The registry reloads on the change announcement; wait until this instance has it.
      const deadline = Date.now() + 5_000;
      while (!svc.running.services.registry.get(sourceId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    },
    async agent(name, grants = [], extra = {}) {
      const created = expectOk(await admin('POST', '/api/identities', { name, generate_key: true, ...extra }), 'create identity');
      for (const g of grants) expectOk(await admin('POST', `/api/identities/${created.json.id}/grants`, g), 'grant');
      return { id: created.json.id as number, key: created.json.api_key as string };
    },
    async policy(body) {
      const created = expectOk(await admin('POST', '/api/policies', body), 'create policy');
      const id = created.json.id as number;
      const deadline = Date.now() + 5_000;
      while (Date.now() < deadline) {
        const set = svc.running.services.policies.tryCurrent();
        if (set && set.policies.some((p) => p.id === id)) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      return id;
    },
    async proxy(key, method, pathAndQuery, init = {}) {
      const headers: Record<string, string> = { ...init.headers };
      if (key !== null) headers.authorization = `Bearer ${key}`;
      return answer(await fetch(`${svc.gatewayUrl}${pathAndQuery}`, { method, headers, body: init.body ?? null, redirect: 'manual' }));
    },
    rawProxy(key, method, rawTarget, init = {}) {
      return rawRequest(svc.gatewayUrl, method, rawTarget, { ...(key !== null ? { authorization: `Bearer ${key}` } : {}), ...init.headers }, init.body);
    },
    stop: () => svc.stop(),
  };
}

/** node:http sends the path as given; only characters Node refuses outright (controls, spaces) cannot be sent. */
export function rawRequest(baseUrl: string, method: string, rawTarget: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path: rawTarget, headers: { ...headers, ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const json = parseJson(text);
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        resolve({ status: res.statusCode ?? 0, text, json, headers: h });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}
