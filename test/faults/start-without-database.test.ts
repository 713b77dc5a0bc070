// Prevents a crash loop when the control database is down at start: the gateway starts, /ready answers 503 with the reason, it retries and becomes ready when the database returns; `gatehouse migrate` still fails fast.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { baseEnv, runCli, startCli, type StartedCli } from '../support/cli.js';
import { startPgServer, type PgServerHandle } from '../support/pg-server.js';
import { TEST_REDIS_URL } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

let cluster: PgServerHandle;
let cwd: string;
let started: StartedCli | null = null;
beforeAll(async () => {
  cluster = await startPgServer();
  await cluster.kill();
  cwd = await mkdtemp(path.join(tmpdir(), 'gh-nodb-'));
}, 60_000);
afterAll(async () => {
  await started?.stop('SIGKILL');
  await cluster?.remove();
  if (cwd) await rm(cwd, { recursive: true, force: true });
});

const env = () =>
  baseEnv({
    SERVICE_GATEWAY__HTTP_PORT: '0',
    SERVICE_GATEWAY__PG_PORT: '0',
    SERVICE_ADMIN__PORT: '0',
    SERVICE_DATABASE__URL: cluster.url,
    SERVICE_DATABASE__CONNECT_TIMEOUT_MS: '1000',
    SERVICE_REDIS__URL: TEST_REDIS_URL,
    SERVICE_REDIS__KEY_PREFIX: `ghnodb:${path.basename(cwd)}:`,
    SERVICE_OBSERVABILITY__READINESS_DETAILS: 'true',
  });

it('`gatehouse migrate` fails fast while the database is down', async () => {
  const t0 = Date.now();
  const result = await runCli(['migrate'], { env: env(), cwd, timeoutMs: 30_000 });
  expect(result.code).toBe(1);
  expect(result.stderr).toMatch(/control store unavailable .*connection refused/);
  expect(Date.now() - t0).toBeLessThan(20_000);
}, 30_000);

it('the gateway starts not ready while the database is down and becomes ready when it returns', async () => {
  for (const role of ['gateway', 'all']) {
    started = await startCli(['start', '--role', role], { env: env(), cwd, timeoutMs: 30_000 });
    const ready = `http://${started.listeners['gateway.http_port']}/ready`;
    const first = await fetch(ready);
    expect(first.status).toBe(503);
    const body = (await first.json()) as { checks: Record<string, { ok: boolean; detail: string }> };
    expect(body.checks.database).toEqual({ ok: false, detail: expect.stringMatching(/control store unavailable .*connection refused/) });
    // Requests are refused as unavailable, not as a crash.
    expect((await fetch(`http://${started.listeners['gateway.http_port']}/proxy/any/x`, { headers: { authorization: 'Bearer some-key-0123456789' } })).status).toBe(503);

    await cluster.start();
    await waitFor(async () => (await fetch(ready)).status === 200, 25_000, `${role}: ready after the database returned`, 250);
    expect(started.output().stdout).toContain('control store unreachable at start');
    await started.stop('SIGKILL');
    started = null;
    await cluster.kill();
  }
}, 59_000);
