// bench:privileges — reconciliation of managed privileges (docs/least-privilege.md) on 1,000 tables × 10 roles against the real PostgreSQL: the first run (everything granted), a run with nothing to do, and a run correcting drift; goal ≤ 5 s each.
import pg from 'pg';
import { compilePolicies } from '../src/governance/policy/index.js';
import type { Grant, SourceRole } from '../src/governance/source-roles.js';
import { reconcileOn } from '../src/privileges/reconciler.js';

const TABLES = Number(process.env.BENCH_TABLES ?? 1000);
const ROLES = 10;
const GOAL_MS = 5_000;
const HOST = '127.0.0.1';
const PORT = 5432;
const dbName = `gh_bench_priv_${Date.now().toString(36)}`;
const prefix = `ghb${Date.now().toString(36).slice(-5)}_`;
const adminRole = `${prefix}adm`;

async function superuser<T>(database: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ host: HOST, port: PORT, user: 'postgres', database });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function main(): Promise<void> {
  await superuser('postgres', (c) => c.query(`create database "${dbName}"`));
  const admin = new pg.Client({ host: HOST, port: PORT, user: adminRole, database: dbName });
  try {
    await superuser(dbName, async (c) => {
      await c.query(`create role "${adminRole}" login createrole; grant connect on database "${dbName}" to "${adminRole}" with grant option;
        create schema app authorization "${adminRole}"; create schema hr authorization "${adminRole}";`);
      const ddl: string[] = [`set role "${adminRole}"`];
      for (let i = 0; i < TABLES; i++) ddl.push(`create table ${i % 2 === 0 ? 'app' : 'hr'}.t${i} (id serial primary key, name text, email text, ssn text, note text)`);
      await c.query(ddl.join(';'));
    });
    await admin.connect();
    // Ten roles: readers and writers over different globs, so each role has its own privilege set.
    const globs = ['*.*', 'app.*', 'hr.*', 'app.t1*', 'hr.t2*', '*.t3*', 'app.t4*', 'hr.t5*', '*.t6*', '*.t7*'];
    const roles: SourceRole[] = globs.map((g, i) => ({
      id: i + 1,
      source_id: 'bench',
      role_key: `role${i}`,
      description: '',
      enabled: true,
      rules: { http: [], sql: [{ operations: i % 3 === 0 ? ['read', 'write'] : ['read'], tables: [g] }] },
    }));
    const grants: Grant[] = [];
    const identities = roles.map((r) => ({ id: r.id, roles: [], team: null, enabled: true }));
    for (const r of roles) grants.push({ id: r.id, identity_id: r.id, source_id: 'bench', role_id: r.id, role_key: r.role_key, enabled: true, expires_at: null, granted_by: null });
    // A column deny for everyone: every table's SELECT becomes column-level (the expensive form).
    const policies = compilePolicies([{ id: 1, name: 'no ssn', priority: 0, enabled: true, conditions: { columns: ['ssn'] }, actions: { effect: 'deny' } }], { version: 1 });
    const target = { sourceId: 'bench', prefix, loginUser: 'postgres', inputs: { roles, grants, identities, policies }, dryRun: false };
    const run = async (label: string) => {
      const started = performance.now();
      const r = await reconcileOn(admin, target);
      const ms = performance.now() - started;
      console.log(`${label.padEnd(34)} ${ms.toFixed(0).padStart(6)} ms  statements ${String(r.statement_count).padStart(6)}  ratio to goal ${(ms / GOAL_MS).toFixed(2)}  ${ms <= GOAL_MS ? 'PASS' : 'FAIL'}`);
    };
    console.log(`reconciliation of ${TABLES} tables x ${ROLES} roles (column-level SELECT: one column denied), goal <= ${GOAL_MS} ms`);
    await run('first (from nothing)');
    await run('steady (nothing to do)');
    await superuser(dbName, async (c) => {
      const drift: string[] = [];
      for (let i = 0; i < 100; i++) drift.push(`grant select on ${i % 2 === 0 ? 'app' : 'hr'}.t${i} to "${prefix}r_role1"`);
      await c.query(drift.join(';'));
    });
    await run('drift on 100 tables corrected');
    await admin.query('drop schema app cascade; drop schema hr cascade');
    await run('1,000 tables dropped (roles emptied)');
  } finally {
    await admin.end().catch(() => undefined);
    await superuser('postgres', async (c) => {
      await c.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [dbName]);
      await c.query(`drop database if exists "${dbName}"`);
      const roles = await c.query<{ rolname: string }>('select rolname from pg_roles where starts_with(rolname, $1)', [prefix]);
      for (const r of roles.rows) await c.query(`drop role if exists "${r.rolname}"`).catch(() => undefined);
    });
  }
}

await main();
