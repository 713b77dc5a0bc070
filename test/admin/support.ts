// Test fixture for the identity, data-source and grant API suites: the shared world, with every admin response body kept for the secret scan.
import { expect } from 'vitest';
import type { TestService } from '../support/service.js';
import { startWorld, type Answer } from '../support/world.js';

export interface ResourceFixture {
  svc: TestService;
  /** The owner's admin API token (Bearer). */
  token: string;
  api(method: string, path: string, json?: unknown): Promise<Answer>;
  /** Every response body seen by this fixture, for the "no secret in any response" scan. */
  bodies: string[];
  /** Every admin audit event recorded by the service, serialized. */
  readonly audits: string[];
  stop(): Promise<void>;
}

export async function startResourceFixture(env: Record<string, string> = {}): Promise<ResourceFixture> {
  const world = await startWorld({ env });
  const bodies: string[] = [];
  return {
    svc: world.svc,
    token: world.token,
    bodies,
    get audits() {
      return world.audits.map((event) => JSON.stringify(event));
    },
    async api(method, path, json) {
      const res = await world.admin(method, path, json);
      bodies.push(res.text);
      return res;
    },
    stop: () => world.stop(),
  };
}

/** Asserts a 422 whose detail holds an item at exactly `loc`. */
export function expect422(res: Answer, loc: Array<string | number>): void {
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
