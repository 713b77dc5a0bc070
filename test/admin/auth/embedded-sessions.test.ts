// The embedded default keeps admin sessions across a restart (in the embedded control store), as PostgreSQL/Redis deployments keep them in Redis; logouts stay logouts.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminClient } from '../../support/admin-client.js';
import { startTestService, type TestService } from '../../support/service.js';

const PASSWORD = 'embedded-owner-password-0001';
let dir: string;
let env: Record<string, string>;
let svc: TestService | undefined;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'gh-embedded-sessions-'));
  // One state directory for both starts: the embedded store and the generated signing secret live there.
  env = {
    SERVICE_DATABASE__EMBEDDED_DIR: path.join(dir, 'pgdata'),
    SERVICE_AUDIT__SPOOL__DIR: path.join(dir, 'audit-spool'),
    SERVICE_ADMIN__BOOTSTRAP_PASSWORD: PASSWORD,
  };
});

afterAll(async () => {
  await svc?.stop();
  await rm(dir, { recursive: true, force: true });
});

async function restart(): Promise<TestService> {
  await svc?.stop();
  svc = await startTestService({ embedded: true, env });
  return svc;
}

/** The same cookie against another process (the admin's port changes with each start). */
function sameBrowser(client: AdminClient, baseUrl: string): AdminClient {
  return new AdminClient(baseUrl, client.cookie, client.csrf);
}

describe('admin sessions of the embedded default', () => {
  it('survive a restart; a session signed out before it stays signed out', async () => {
    const first = await restart();
    expect(first.running.services.coord.kind).toBe('memory');
    const kept = await AdminClient.signIn(first.adminUrl, 'admin', PASSWORD);
    const left = await AdminClient.signIn(first.adminUrl, 'admin', PASSWORD);
    expect((await kept.request('GET', '/api/session')).status).toBe(200);
    expect((await left.request('POST', '/auth/logout')).status).toBeLessThan(400);

    const second = await restart();
    const again = sameBrowser(kept, second.adminUrl);
    const session = await again.request('GET', '/api/session');
    expect(session.status, session.text).toBe(200);
    expect(session.json.csrf_token).toBe(kept.csrf);
    // A mutation with the old CSRF token still works: the record, not only the cookie, came back.
    const token = await again.request('POST', '/api/admin-tokens', { json: { name: 'after-restart' } });
    expect(token.status, token.text).toBe(201);

    const gone = await sameBrowser(left, second.adminUrl).request('GET', '/api/session');
    expect(gone.status).toBe(401);
  }, 60_000);
});
