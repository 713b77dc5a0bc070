// Test fixture for the identity, data-source and grant API suites: a service, an owner's admin API token, and a client that keeps every response body for the secret scan.
import { expect } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';
import { ownerToken } from '../support/world.js';

export const OWNER_PASSWORD = 'resources-owner-password-0001';

export interface Res {
  status: number;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface ResourceFixture {
  svc: TestService;
  api(method: string, path: string, json?: unknown, rawBody?: string): Promise<Res>;
  /** Every response body seen by this fixture, for the "no secret in any response" scan. */
  bodies: string[];
  /** Every admin audit event recorded by the service, serialized. */
  audits: string[];
  stop(): Promise<void>;
}

async function read(res: Response): Promise<Res> {
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, text, json };
}

export async function startResourceFixture(env: Record<string, string> = {}): Promise<ResourceFixture> {
  const svc = await startTestService({ env: { SERVICE_ADMIN__BOOTSTRAP_PASSWORD: OWNER_PASSWORD, ...env } });
  const bodies: string[] = [];
  const audits: string[] = [];
  const auditor = svc.running.services.adminAudit;
  const record = auditor.record.bind(auditor);
  auditor.record = async (event) => {
    audits.push(JSON.stringify(event));
    await record(event);
  };
  const base = svc.adminUrl;
  const token = await ownerToken(base, OWNER_PASSWORD);
  return {
    svc,
    bodies,
    audits,
    async api(method, path, json, rawBody) {
      const headers: Record<string, string> = { authorization: `Bearer ${token}` };
      if (json !== undefined || rawBody !== undefined) headers['content-type'] = 'application/json';
      const res = await read(await fetch(base + path, { method, headers, body: rawBody ?? (json === undefined ? null : JSON.stringify(json)), redirect: 'manual' }));
      bodies.push(res.text);
      return res;
    },
    stop: () => svc.stop(),
  };
}

/** Asserts a 422 whose detail holds an item at exactly `loc`. */
export function expect422(res: Res, loc: Array<string | number>): void {
  expect(res.status, res.text).toBe(422);
  const locs = (res.json.detail as Array<{ loc: unknown[] }>).map((d) => JSON.stringify(d.loc));
  expect(locs, res.text).toContain(JSON.stringify(loc));
}

/** No collected body contains any of the secrets (checked whole and as a long-enough fragment). */
export function expectNoSecrets(bodies: readonly string[], secrets: readonly string[]): void {
  expect(bodies.length).toBeGreaterThan(10);
  for (const secret of secrets) {
    for (const body of bodies) expect(body.includes(secret), `a response body contains a test secret (${secret.slice(0, 4)}…)`).toBe(false);
  }
}
