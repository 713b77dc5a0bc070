// docs/first-run.md as written: its start command's settings start the service (embedded, config/development.yaml), and its `sh first-run` blocks run in order in one bash against it.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/cli.js';
import { createTestDatabase, TEST_PG_HOST, TEST_PG_PORT, type TestDatabase } from '../support/pg.js';
import { startTestService, type TestService } from '../support/service.js';

const DOC = path.join(ROOT, 'docs', 'first-run.md');

/** The fenced blocks whose info string is `sh <tag>`, in document order. */
export function fencedBlocks(markdown: string, tag: string): string[] {
  const blocks: string[] = [];
  const re = /^```sh ([^\n]+)\n([\s\S]*?)^```$/gm;
  for (const m of markdown.matchAll(re)) if (m[1]!.trim() === tag) blocks.push(m[2]!);
  return blocks;
}

/** `A=1 B=2 npm start` → {A: '1', B: '2'}; anything else in the start block is a failure (the test could not honour it). */
function startSettings(block: string): Record<string, string> {
  const words = block.trim().split(/\s+/);
  expect(words.slice(-2)).toEqual(['npm', 'start']);
  return Object.fromEntries(
    words.slice(0, -2).map((w) => {
      const m = /^(SERVICE_[A-Z0-9_]+)=(\S+)$/.exec(w);
      expect(m, `start block word ${w}`).not.toBeNull();
      return [m![1]!, m![2]!];
    }),
  );
}

let svc: TestService;
let db: TestDatabase;
let work: string;

beforeAll(async () => {
  const doc = readFileSync(DOC, 'utf8');
  const [start, ...more] = fencedBlocks(doc, 'first-run:start');
  expect(more).toEqual([]);
  db = await createTestDatabase();
  work = await mkdtemp(path.join(tmpdir(), 'gh-first-run-'));
  // What `npm start` runs (package.json "start": config/development.yaml, embedded store, in-process coordination),
  // with the doc's settings; only the ports are free ones, since this machine is shared.
  svc = await startTestService({
    embedded: true,
    env: { SERVICE_CONFIG_PATH: path.join(ROOT, 'config', 'development.yaml'), SERVICE_ENVIRONMENT: 'development', ...startSettings(start!) },
  });
}, 120_000);

afterAll(async () => {
  await svc?.stop();
  await db?.drop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('docs/first-run.md', () => {
  it("is on the README's first screen with the sign-in it starts from", () => {
    const firstScreen = readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n').slice(0, 30).join('\n');
    expect(firstScreen).toContain('(docs/first-run.md)');
    expect(firstScreen).toContain('`admin`');
    expect(firstScreen).toContain('`gatehouse-change-me`');
    expect(readFileSync(DOC, 'utf8')).toContain("password=gatehouse-change-me'");
  });

  it('every step runs as written and each front door answers', { timeout: 120_000 }, async () => {
    const blocks = fencedBlocks(readFileSync(DOC, 'utf8'), 'first-run');
    expect(blocks.length).toBeGreaterThanOrEqual(8);
    const script = ['set -euo pipefail', ...blocks].join('\n');
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: work,
      ADMIN: svc.adminUrl,
      GATEWAY: svc.gatewayUrl,
      GATEWAY_PG_PORT: String(svc.running.addresses['gateway.pg_port']!.port),
      DB_HOST: TEST_PG_HOST,
      DB_PORT: String(TEST_PG_PORT),
      DB_NAME: db.name,
      PGCONNECT_TIMEOUT: '10',
    };
    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn('bash', ['-c', script], { cwd: work, env });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    expect(out.code, `${out.stdout}\n${out.stderr}`).toBe(0);
    expect(out.stderr, out.stdout).toBe('');
    const lines = out.stdout.split('\n');
    expect(lines).toContain('{"status":"ok"}');
    expect(lines.some((l) => /^admin password: \S{24}$/.test(l))).toBe(true);
    expect(lines).toContain('{"ok":true,"error":null}');
    expect(lines).toContain('{"title":"Gatehouse admin API","version":"1.0.0rc13"}');
    // psql's table: the row through the wire listener, the email redacted.
    expect(out.stdout).toMatch(/^\s+1 \| Ada\s+\| \[REDACTED:email\]$/m);
    expect(lines).toContain('[["1","Ada"]]');
    for (const channel of ['http', 'pgwire', 'mcp']) expect(out.stdout).toContain(`{"channel":"${channel}","decision":"allow"}`);
  });
});
