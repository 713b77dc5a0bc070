// Second driver family and the benchmark client: Python psycopg2 (Debian package, run with Debian's /usr/bin/python3) and pgbench's built-in scripts in extended and prepared modes, through the wire listener.
import { execFile, execFileSync } from 'node:child_process';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startWireWorld, type WireWorld } from './fixture.js';

let ww: WireWorld;
let writer: { id: number; key: string };

function run(cmd: string, args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { ...process.env, ...env }, timeout: timeoutMs }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'pgbenchsrc' });
  // pgbench tables are created directly upstream (its -i runs DDL, which is the admin's).
  execFileSync('pgbench', ['-i', '-q', '-s', '1', '-h', '127.0.0.1', '-p', '5432', '-U', 'postgres', ww.upstream.name], { stdio: 'ignore' });
  writer = await ww.world.agent('bench-writer', [{ source_id: ww.sourceId, role_key: 'writer' }]);
}, 90_000);
afterAll(async () => ww?.stop());

test('psycopg2 connects with SCRAM, runs parameterised statements and sees governance refusals', async () => {
  const probe = await run('/usr/bin/python3', ['-c', 'import psycopg2'], {});
  // No silent skip: a machine without psycopg2 fails here with the fix.
  expect(probe.code, `python3-psycopg2 is missing: apt-get install -y python3-psycopg2 (${probe.stderr})`).toBe(0);
  const script = `
import psycopg2, sys
c = psycopg2.connect(host='127.0.0.1', port=${ww.port}, user='bench-writer', password=sys.argv[1], dbname='${ww.sourceId}', sslmode='disable')
cur = c.cursor()
cur.execute('select name from customers where id = %s', (2,))
print('row', cur.fetchone()[0])
cur.execute("insert into notes(body) values (%s)", ('from python',))
c.commit()
try:
    cur.execute('SET ROLE postgres')
except psycopg2.Error as e:
    print('refused', e.pgcode)
c.rollback()
c.close()
`;
  const r = await run('/usr/bin/python3', ['-c', script, writer.key], {});
  expect(r.stderr).toBe('');
  expect(r.stdout).toContain('row Bob');
  expect(r.stdout).toContain('refused 42501');
  expect(await ww.direct(async (d) => (await d.query("select count(*)::int as n from notes where body = 'from python'")).rows[0].n)).toBe(1);
});

for (const mode of ['extended', 'prepared', 'simple']) {
  test(`pgbench -M ${mode}: select-only and TPC-B-like scripts`, async () => {
    const env = { PGPASSWORD: writer.key, PGSSLMODE: 'disable' };
    const common = ['-n', '-h', '127.0.0.1', '-p', String(ww.port), '-U', 'bench-writer', '-M', mode, '-c', '2', '-j', '1', '-T', '2', ww.sourceId];
    const s = await run('pgbench', ['-S', ...common], env);
    expect(s.stderr + s.stdout).toMatch(/number of failed transactions: 0/);
    expect(s.stdout).toMatch(/tps = \d+/);
    const b = await run('pgbench', common, env);
    expect(b.stderr + b.stdout).toMatch(/number of failed transactions: 0/);
    expect(b.stdout).toMatch(/tps = \d+/);
  }, 30_000);
}
