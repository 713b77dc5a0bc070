// A wire world whose source uses managed privileges: its tables owned by a CREATEROLE admin that is not a superuser, sessions logging in upstream as the superuser postgres (the case least privilege exists for), and the roles cleaned up afterwards.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { startWireWorld, type WireWorld } from '../pgwire/fixture.js';
import { TEST_PG_HOST, TEST_PG_PORT } from '../support/pg.js';
import { waitFor } from '../support/wait.js';

export interface ManagedWorld extends WireWorld {
  prefix: string;
  adminRole: string;
  /** A client on the upstream database as the privilege admin (not a superuser). */
  asAdmin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T>;
}

export function tablesSql(admin: string): string {
  return `
create role "${admin}" login createrole;
do $$ begin execute format('grant connect on database %I to %I with grant option', current_database(), '${admin}'); end $$;
grant usage, create on schema public to "${admin}" with grant option;
set role "${admin}";
create table customers (id int primary key, name text, email text, ssn text);
insert into customers values (1, 'Ada', 'ada@example.com', '123-45-6789'), (2, 'Bob', 'bob@example.com', '987-65-4321');
create table notes (id serial primary key, body text);
create table secrets (id int, v text);
insert into secrets values (1, 'launch code');
create view customer_names as select id, name from customers;
reset role;
`;
}

export async function startManagedWorld(opts: { env?: Record<string, string>; sourceId?: string; maskedReads?: boolean } = {}): Promise<ManagedWorld> {
  const prefix = `ght${randomBytes(3).toString('hex')}_`;
  const adminRole = `${prefix}adm`;
  // Masked reads: the admin creates a schema per masked role, so it also needs CREATE on the database.
  const masking = opts.maskedReads === true ? `do $$ begin execute format('grant create on database %I to %I', current_database(), '${adminRole}'); end $$;` : '';
  const ww = await startWireWorld({
    sourceId: opts.sourceId ?? 'mgd',
    setupSql: tablesSql(adminRole) + masking,
    sourceConfig: { privileges: 'managed', privilege_admin: { user: adminRole }, managed_role_prefix: prefix, ...(opts.maskedReads === true ? { masked_reads: true } : {}) },
    env: { SERVICE_GATEWAY__TEST_HOOKS__SKIP_SQL_ANALYSIS: 'true', SERVICE_GATEWAY__MANAGED_PRIVILEGES__RECONCILE_INTERVAL_SECONDS: '3600', ...opts.env },
  });
  const stop = ww.stop.bind(ww);
  return {
    ...ww,
    prefix,
    adminRole,
    async asAdmin(fn) {
      const c = new pg.Client({ host: TEST_PG_HOST, port: TEST_PG_PORT, user: adminRole, database: ww.upstream.name });
      await c.connect();
      try {
        return await fn(c);
      } finally {
        await c.end();
      }
    },
    async stop() {
      await stop();
      await dropRoles(prefix);
    },
  };
}

/** Roles are global to the server: every role under the test's prefix is dropped once its database is gone. */
export async function dropRoles(prefix: string): Promise<void> {
  const c = new pg.Client({ host: TEST_PG_HOST, port: TEST_PG_PORT, user: 'postgres', database: 'postgres' });
  await c.connect();
  try {
    const roles = await c.query<{ rolname: string }>('select rolname from pg_roles where starts_with(rolname, $1)', [prefix]);
    for (const r of roles.rows) await c.query(`drop role if exists "${r.rolname}"`).catch(() => undefined);
  } finally {
    await c.end();
  }
}

/** The managed-privilege state of a source (the world's own by default) in the world's process, through the admin API. */
export async function privilegeState(ww: WireWorld, sourceId = ww.sourceId): Promise<{ status: string; reason: string | null; session_roles: Record<string, string>; base_role: string | null }> {
  const r = await ww.world.admin('GET', `/api/data-sources/${sourceId}/privileges`);
  if (r.status !== 200) throw new Error(`privileges state: ${r.status} ${r.text}`);
  return r.json as never;
}

type PrivilegeState = Awaited<ReturnType<typeof privilegeState>>;

/**
 * Waits until the source's managed-privilege state satisfies `holds` (30 s by default: a first reconciliation under
 * the full suite's load, or one retried after a failure); a timeout names the last state seen, so a failure says why.
 */
export async function waitForPrivileges(ww: WireWorld, holds: (state: PrivilegeState) => boolean, what: string, opts: { sourceId?: string; timeoutMs?: number } = {}): Promise<void> {
  let last: PrivilegeState | undefined;
  await waitFor(async () => holds((last = await privilegeState(ww, opts.sourceId))), opts.timeoutMs ?? 30_000, what).catch((err: Error) => {
    throw new Error(`${err.message}; last state ${JSON.stringify(last)}`);
  });
}
