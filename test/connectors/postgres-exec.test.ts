// The executor's sessions against the local PostgreSQL: a session's reset written behind its last statement (no round trip of its own) leaves the pooled connection as clean as a reset of its own, and every way it can fail falls back to one.
import net from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test, vi } from 'vitest';
import pg from 'pg';
import { PostgresExecutor, UpstreamConnection, UpstreamPools, UpstreamSqlError } from '../../src/connectors/postgres-exec.js';
import { PostgresWriteEffects } from '../../src/connectors/postgres-effects.js';
import { Frontend } from '../../src/gateway/pgwire/protocol.js';
import { createPiiScanner } from '../../src/governance/pii/index.js';
import { createLogger } from '../../src/observability/logger.js';
import type { RegisteredSource } from '../../src/registry/sources.js';
import { TEST_PG_HOST, TEST_PG_PORT } from '../support/pg.js';

const log = createLogger({ level: 'silent', service: 'test', role: 'gateway' });
const ROLE = `gh_exec_reset_${process.pid}`;
const TABLE = `gh_exec_probe_${process.pid}`;
const source = {
  source_id: 'exec-src',
  source_type: 'postgres',
  enabled: true,
  connection_config: { host: TEST_PG_HOST, port: TEST_PG_PORT, database: 'postgres', user: 'postgres', ssl_mode: 'disable' },
} as unknown as RegisteredSource;
const asRole = { mapped_pg_role: ROLE };
const asLogin = { mapped_pg_role: null };

let admin: pg.Client;
let pools: UpstreamPools;
let executor: PostgresExecutor;

beforeAll(async () => {
  admin = new pg.Client({ host: TEST_PG_HOST, port: TEST_PG_PORT, user: 'postgres', database: 'postgres' });
  await admin.connect();
  await admin.query(`drop role if exists ${ROLE}`);
  await admin.query(`create role ${ROLE} nologin`);
  await admin.query(`drop table if exists ${TABLE}`);
  await admin.query(`create table ${TABLE} (n int)`);
  await admin.query(`grant select, insert on ${TABLE} to ${ROLE}`);
  await admin.query(`alter table ${TABLE} owner to ${ROLE}`);
  await admin.query(`grant create on schema public to ${ROLE}`);
  // Immutable, so the planner runs it while planning (constant folding): an EXPLAIN that takes 300 ms.
  await admin.query(`create or replace function ${TABLE}_slow(n int) returns int immutable language plpgsql as $$ begin perform pg_sleep(0.3); return n; end $$`);
  await admin.query(`create or replace procedure ${TABLE}_rollback() language plpgsql as $$ begin rollback; insert into ${TABLE} values (case when current_user = '${ROLE}' then 10 else 11 end); end $$`);
});

afterAll(async () => {
  await admin.query(`drop procedure if exists ${TABLE}_rollback()`);
  await admin.query(`drop function if exists ${TABLE}_slow(int)`);
  await admin.query(`drop table if exists ${TABLE}`);
  await admin.query(`revoke create on schema public from ${ROLE}`);
  await admin.query(`drop role if exists ${ROLE}`);
  await admin.end();
});

beforeEach(() => {
  pools = new UpstreamPools({ log, resolveSecretRef: () => ({ ok: false, problem: 'unset' }) as never, checkTarget: async (_id, host) => ({ address: host }), maxMessageBytes: 1 << 20, connectTimeoutMs: 5_000 });
  executor = new PostgresExecutor(pools, createPiiScanner());
});

afterEach(async () => {
  vi.restoreAllMocks();
  await pools.close();
});

/** The session as a fresh statement sees it: backend, role, a setting the last statement changed, open transaction. */
async function sessionState(): Promise<string[]> {
  return executor.withSession(source, asLogin, async (run) => {
    const r = await run("select pg_backend_pid()::text, current_user::text, current_setting('application_name'), (select count(*) from pg_prepared_statements)::text, pg_current_xact_id_if_assigned() is null", [], { last: true });
    return r.rows[0]! as string[];
  });
}

/** Every buffer the pool writes to its upstream connections. */
function recordWrites(): Buffer[] {
  const writes: Buffer[] = [];
  const write = UpstreamConnection.prototype.write;
  vi.spyOn(UpstreamConnection.prototype, 'write').mockImplementation(function (this: UpstreamConnection, buf: Buffer) {
    writes.push(buf);
    return write.call(this, buf);
  });
  return writes;
}

/** The SQL a written buffer carries, in order: Query messages as they are, Parse messages as `parse: <sql>`. */
function sqlIn(buf: Buffer): string[] {
  const out: string[] = [];
  for (let at = 0; at + 5 <= buf.length; ) {
    const length = buf.readInt32BE(at + 1);
    const body = buf.subarray(at + 5, at + 1 + length);
    if (buf[at] === Frontend.Query) out.push(body.toString('utf8', 0, body.length - 1));
    if (buf[at] === Frontend.Parse) {
      const name = body.indexOf(0);
      out.push(`parse: ${body.toString('utf8', name + 1, body.indexOf(0, name + 1))}`);
    }
    at += 1 + length;
  }
  return out;
}

/** The Query messages in a written buffer (the simple protocol's statements). */
const queriesIn = (buf: Buffer): string[] => sqlIn(buf).filter((q) => !q.startsWith('parse: '));

describe('a session reset written behind the last statement', () => {
  test('goes out with the statement, and the reused connection is as clean as after a reset of its own', async () => {
    const [pid] = await sessionState();
    const writes = recordWrites();
    const changed = await executor.withSession(source, asRole, async (run) => {
      await run('prepare kept as select 1');
      const r = await run("select current_user::text, set_config('application_name', 'changed by the agent', false)", [], { last: true });
      return r.rows[0];
    });
    expect(changed).toEqual([ROLE, 'changed by the agent']);
    // SET ROLE, the first statement, then the last one with DISCARD ALL right behind its Sync: no write of the release's own.
    expect(writes.map(queriesIn)).toEqual([[`SET ROLE "${ROLE}"`], [], ['DISCARD ALL']]);
    expect(writes[2]!.subarray(0, 1).toString()).toBe('P');
    vi.restoreAllMocks();
    // The same backend, back to the login role, the startup application_name, no prepared statement, no transaction.
    expect(await sessionState()).toEqual([pid, 'postgres', 'gatehouse', '0', 't']);
    expect(pools.stats()[0]).toMatchObject({ open: 1, idle: 1 });
  });

  test('a last statement that fails still resets the session behind it', async () => {
    const [pid] = await sessionState();
    const writes = recordWrites();
    await expect(
      executor.withSession(source, asRole, async (run) => {
        await run("select set_config('application_name', 'changed', false)");
        return run('select * from no_such_table_anywhere', [], { last: true });
      }),
    ).rejects.toBeInstanceOf(UpstreamSqlError);
    expect(writes.flatMap(queriesIn)).toEqual([`SET ROLE "${ROLE}"`, 'DISCARD ALL']);
    vi.restoreAllMocks();
    expect(await sessionState()).toEqual([pid, 'postgres', 'gatehouse', '0', 't']);
  });

  test('inside a transaction block the pipelined reset fails, and the release rolls back and resets anew', async () => {
    const [pid] = await sessionState();
    const writes = recordWrites();
    await executor.withSession(source, asRole, async (run) => {
      await run('begin');
      await run("select set_config('application_name', 'in a transaction', false)", [], { last: true });
    });
    // DISCARD ALL cannot run in a transaction block (25001): the release's own ROLLBACK and DISCARD ALL follow.
    expect(writes.flatMap(queriesIn)).toEqual([`SET ROLE "${ROLE}"`, 'DISCARD ALL', 'ROLLBACK', 'DISCARD ALL']);
    vi.restoreAllMocks();
    expect(await sessionState()).toEqual([pid, 'postgres', 'gatehouse', '0', 't']);
  });

  test('a COPY FROM STDIN as the last statement ends its connection: no hang, no reuse', async () => {
    const [pid] = await sessionState();
    // COPY … TO STDOUT answers in full before ReadyForQuery: the reset behind it completes.
    await expect(executor.withSession(source, asRole, (run) => run('copy (select 1) to stdout', [], { last: true }))).resolves.toMatchObject({ command: 'COPY 1' });
    expect(await sessionState()).toEqual([pid, 'postgres', 'gatehouse', '0', 't']);
    // FROM STDIN: PostgreSQL reads the reset's Query in copy-in mode and ends the session (protocol synchronization lost).
    const copied = executor.withSession(source, asRole, async (run) => {
      await run('create temp table copy_target (n int)');
      return run('copy copy_target from stdin', [], { last: true });
    });
    await expect(copied).rejects.toThrow('closed');
    expect(pools.stats()[0]).toMatchObject({ open: 0, idle: 0 });
    const [next] = await sessionState();
    expect(next).not.toBe(pid);
  });

  test('no statement runs on a session after its last one', async () => {
    const after = executor.withSession(source, asRole, async (run) => {
      await run('select 1', [], { last: true });
      return run('select current_user');
    });
    await expect(after).rejects.toThrow('already reset');
    expect(pools.stats()[0]).toMatchObject({ open: 1, idle: 1 });
  });

  test('a connection whose last statement never answered is closed, not reused', async () => {
    const [pid] = await sessionState();
    // The statement is cancelled by the connection closing under it: its ReadyForQuery never comes.
    await expect(
      executor.withSession(source, asLogin, async (run) => {
        const pending = run('select pg_sleep(30)', [], { last: true });
        // It may reject while the termination below is still awaited: handled at once, asserted below.
        pending.catch(() => undefined);
        await new Promise((r) => setTimeout(r, 100));
        await admin.query('select pg_terminate_backend($1)', [Number(pid)]);
        return pending;
      }),
    ).rejects.toThrow();
    expect(pools.stats()[0]).toMatchObject({ open: 0, idle: 0 });
    const [next] = await sessionState();
    expect(next).not.toBe(pid);
  });
});

describe('the role a statement runs under, sent with it', () => {
  test("a session's only statement carries SET ROLE ahead of it and the reset behind it: one write", async () => {
    const [pid] = await sessionState();
    const writes = recordWrites();
    const r = await executor.withSession(source, asRole, (run) => run('select current_user::text', [], { last: true }));
    expect(r).toMatchObject({ rows: [[ROLE]], command: 'SELECT 1' });
    expect(writes.map(sqlIn)).toEqual([['parse: BEGIN', `parse: SET ROLE "${ROLE}"`, 'parse: COMMIT', 'parse: select current_user::text', 'DISCARD ALL']]);
    vi.restoreAllMocks();
    expect(await sessionState()).toEqual([pid, 'postgres', 'gatehouse', '0', 't']);
  });

  test('a buffered execution (MCP query, approved write) sends SET ROLE, its statement and the reset in one write', async () => {
    const [pid] = await sessionState();
    const writes = recordWrites();
    const r = await executor.executeSql({ source, identity: asRole, sql: `insert into ${TABLE} values (1) returning current_user::text`, params: [], maxRows: 10 });
    expect(r).toMatchObject({ rows: [[ROLE]], command: 'INSERT 0 1' });
    expect(writes.map(sqlIn)).toEqual([['parse: BEGIN', `parse: SET ROLE "${ROLE}"`, 'parse: COMMIT', `parse: insert into ${TABLE} values (1) returning current_user::text`, 'DISCARD ALL']]);
    vi.restoreAllMocks();
    expect(await sessionState()).toEqual([pid, 'postgres', 'gatehouse', '0', 't']);
  });

  test('a buffered execution that may be a COPY keeps its reset apart: COPY FROM STDIN fails alone and the connection stays', async () => {
    const [pid] = await sessionState();
    const writes = recordWrites();
    // Every spelling PostgreSQL reads as COPY FROM STDIN: keywords in any case, after comments and whitespace, a
    // quoted table, the old `FROM stdin` forms; a function cannot copy from the client (PostgreSQL refuses it there).
    const spellings = [
      `copy ${TABLE} from stdin`,
      `CoPy ${TABLE} FROM STDIN`,
      `/* a comment */ -- and another\n\tCOPY "${TABLE}" (n) FROM stdin WITH (FORMAT csv)`,
      `COPY ${TABLE} FROM STDIN BINARY`,
    ];
    for (const sql of spellings) {
      await expect(executor.executeSql({ source, identity: asRole, sql, params: [], maxRows: 10 }), sql).rejects.toThrow('needs a client data stream');
    }
    expect(writes.flatMap(queriesIn)).toEqual(spellings.map(() => 'DISCARD ALL'));
    expect(writes.at(-1)!.subarray(0, 1).toString()).toBe('Q');
    vi.restoreAllMocks();
    expect(await sessionState()).toEqual([pid, 'postgres', 'gatehouse', '0', 't']);
  });

  test('when SET ROLE fails, the statement behind it does not run', async () => {
    const before = Number((await admin.query(`select count(*) from ${TABLE}`)).rows[0].count);
    const missing = { mapped_pg_role: `${ROLE}_missing` };
    await expect(executor.executeSql({ source, identity: missing, sql: `insert into ${TABLE} values (2)`, params: [], maxRows: 10 })).rejects.toMatchObject({ sqlstate: '22023' });
    await expect(executor.withSession(source, missing, (run) => run(`insert into ${TABLE} values (3)`, [], { last: true }))).rejects.toMatchObject({ sqlstate: '22023' });
    expect(Number((await admin.query(`select count(*) from ${TABLE}`)).rows[0].count)).toBe(before);
    expect(await sessionState()).toMatchObject([expect.any(String), 'postgres', 'gatehouse', '0', 't']);
    expect(pools.stats()[0]).toMatchObject({ open: 1, idle: 1 });
  });

  test('a session of several statements sets the role first, on its own: a failed statement cannot drop it for the next', async () => {
    const r = await executor.withSession(source, asRole, async (run) => {
      await expect(run('select * from no_such_table_anywhere')).rejects.toBeInstanceOf(UpstreamSqlError);
      return run('select current_user::text', [], { last: true });
    });
    expect(r.rows).toEqual([[ROLE]]);
  });
});

describe('the role ahead of the statement is the session\'s before the statement starts', () => {
  const count = async (n: number) => Number((await admin.query(`select count(*) from ${TABLE} where n = $1`, [n])).rows[0].count);

  test('a ROLLBACK or COMMIT inside a DO block or a procedure does not drop the role for the rest of its body', async () => {
    const [asRoleBefore, asLoginBefore] = [await count(10), await count(11)];
    // The body inserts 10 as the role, 11 as anyone else (the login role is a superuser here).
    const insert = `insert into ${TABLE} values (case when current_user = '${ROLE}' then 10 else 11 end)`;
    await executor.executeSql({ source, identity: asRole, sql: `do $$ begin rollback; ${insert}; end $$`, params: [], maxRows: 10 });
    await executor.executeSql({ source, identity: asRole, sql: `DO LANGUAGE plpgsql $body$ BEGIN COMMIT; ROLLBACK; ${insert}; END $body$`, params: [], maxRows: 10 });
    await admin.query(`grant execute on procedure ${TABLE}_rollback() to ${ROLE}`);
    await executor.executeSql({ source, identity: asRole, sql: `call ${TABLE}_rollback()`, params: [], maxRows: 10 });
    await executor.withSession(source, asRole, (run) => run(`call ${TABLE}_rollback()`, [], { last: true }));
    expect([await count(10), await count(11)]).toEqual([asRoleBefore + 4, asLoginBefore]);
  });

  test('setting the role ahead raises no warning on the source (a COMMIT without its BEGIN would log one per execution)', async () => {
    const types: number[] = [];
    const setHandler = UpstreamConnection.prototype.setHandler;
    vi.spyOn(UpstreamConnection.prototype, 'setHandler').mockImplementation(function (this: UpstreamConnection, handler, chunkEnd) {
      const seen: typeof handler = handler === null ? null : (type, raw, body) => (types.push(type), handler(type, raw, body));
      return setHandler.call(this, seen, chunkEnd);
    });
    await executor.executeSql({ source, identity: asRole, sql: 'select 1', params: [], maxRows: 10 });
    await executor.withSession(source, asRole, (run) => run('select 1', [], { last: true }));
    expect(types.filter((t) => t === 0x43).length).toBeGreaterThanOrEqual(8); // CommandComplete: the handler saw the answers
    expect(types.filter((t) => t === 0x4e)).toEqual([]); // NoticeResponse
  });

  test('statements that cannot run in a transaction block or a pipeline run as they did with SET ROLE on its own', async () => {
    for (const [sql, command] of [
      [`vacuum ${TABLE}`, 'VACUUM'],
      [`create index concurrently if not exists ${TABLE}_n on ${TABLE} (n)`, 'CREATE INDEX'],
      [`drop index concurrently if exists ${TABLE}_n`, 'DROP INDEX'],
    ] as const) {
      await expect(executor.executeSql({ source, identity: asRole, sql, params: [], maxRows: 10 }), sql).resolves.toMatchObject({ command });
    }
  });
});

describe('a connection lost while the reset behind its statement is answered', () => {
  test('neither hangs the execution nor keeps its pool slot', async () => {
    // A relay that passes the statement's answer up to its ReadyForQuery, then closes both sides before the reset's.
    let cut = false;
    const relay = net.createServer((client) => {
      const upstream = net.connect(TEST_PG_PORT, TEST_PG_HOST);
      let armed = false;
      let held = Buffer.alloc(0);
      client.on('data', (d) => {
        if (d.includes('DISCARD ALL\0') && d[0] === Frontend.Parse) armed = true;
        upstream.write(d);
      });
      upstream.on('data', (d) => {
        if (!armed) return void client.write(d);
        held = Buffer.concat([held, d]);
        for (let at = 0; at + 5 <= held.length; at += 1 + held.readInt32BE(at + 1)) {
          if (held[at] !== 0x5a) continue; // ReadyForQuery
          client.write(held.subarray(0, at + 1 + held.readInt32BE(at + 1)));
          cut = true;
          upstream.removeAllListeners('data');
          setTimeout(() => (client.destroy(), upstream.destroy()), 20);
          return;
        }
      });
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const port = (relay.address() as net.AddressInfo).port;
    const relayed = { ...source, connection_config: { ...source.connection_config, port } } as RegisteredSource;
    try {
      const outcome = await Promise.race([
        executor.executeSql({ source: relayed, identity: asLogin, sql: 'select 1', params: [], maxRows: 10 }).then((r) => r.command),
        new Promise((r) => setTimeout(() => r('still pending after 5 s'), 5_000)),
      ]);
      expect(cut).toBe(true);
      expect(outcome).toBe('SELECT 1');
      expect(pools.stats().find((p) => p.open > 0)).toBeUndefined();
    } finally {
      relay.close();
    }
  });
});

describe("a write's estimate past its deadline", () => {
  test("takes no second measuring session for a table's size once its caller was answered", async () => {
    // Every write sized (share_min_rows 0), 100 ms to answer; this pool has no session timeout, so the EXPLAIN completes.
    const measured = { ...source, connection_config: { ...source.connection_config, write_risk: { estimate_timeout_ms: 100, share_min_rows: 0 } } } as RegisteredSource;
    const sessions = vi.spyOn(executor, 'withSession');
    const effects = new PostgresWriteEffects(executor, log);
    const r = await effects.estimate({ source: measured, identity: asLogin, sql: `update ${TABLE} set n = n where n > ${TABLE}_slow(0)`, params: [] });
    expect(r.estimate).toEqual({ ok: false, reason: 'timed out' });
    // The EXPLAIN ends 300 ms in and its session goes back to the pool; the size would be asked for right after it.
    await vi.waitFor(() => expect(pools.stats()[0]).toMatchObject({ open: 1, idle: 1 }), { timeout: 10_000, interval: 50 });
    await new Promise((done) => setTimeout(done, 200));
    expect(sessions).toHaveBeenCalledTimes(1);
  });
});
