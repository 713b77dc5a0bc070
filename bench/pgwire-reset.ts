// bench:pgwire-reset — what a session reset costs through the gateway (the re-apply of the governed state after DISCARD ALL / RESET ROLE, docs/decisions/0009-session-reset-reapply.md): sequential statements on one node-postgres session, gateway against PostgreSQL directly; prints per-statement latency and ratios.
import pg from 'pg';
import { startWireWorld } from '../test/pgwire/fixture.js';

const N = Number(process.env.BENCH_STATEMENTS ?? 2000);
const MAPPED = 'gh_bench_mapped';

async function timed(c: pg.Client, sql: string): Promise<number> {
  for (let i = 0; i < 50; i++) await c.query(sql);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await c.query(sql);
  return Number(process.hrtime.bigint() - t0) / 1e3 / N;
}

const ww = await startWireWorld({ sourceId: 'benchreset' });
try {
  await ww.direct((c) => c.query(`do $$ begin if not exists (select from pg_roles where rolname = '${MAPPED}') then create role ${MAPPED}; end if; end $$`));
  const agent = await ww.world.agent('bench-reset', [{ source_id: ww.sourceId, role_key: 'reader' }], { mapped_pg_role: MAPPED });
  const gw = await ww.client('bench-reset', agent.key);
  const direct = new pg.Client({ connectionString: ww.upstream.url });
  await direct.connect();
  await direct.query(`SET ROLE ${MAPPED}`);
  const rows: Array<[string, number, number]> = [];
  for (const sql of ['select 1', 'DISCARD ALL', 'RESET ROLE', 'RESET ALL']) rows.push([sql, await timed(direct, sql), await timed(gw, sql)]);
  const base = rows[0]![2];
  console.log(`${N} sequential statements each, one session, µs per statement`);
  console.log('statement      direct  gateway  gateway/direct  gateway/(gateway select 1)');
  for (const [sql, d, g] of rows) console.log(`${sql.padEnd(13)} ${d.toFixed(0).padStart(7)} ${g.toFixed(0).padStart(8)} ${(g / d).toFixed(2).padStart(15)} ${(g / base).toFixed(2).padStart(27)}`);
  await gw.end();
  await direct.end();
} finally {
  await ww.stop();
}
