// A statement the gateway refuses inside a transaction leaves the transaction failed on both sides, as PostgreSQL would: the next statement answers 25P02, COMMIT answers ROLLBACK and commits nothing, and only ROLLBACK (or ROLLBACK TO SAVEPOINT) leaves the failed state. Before, the upstream block stayed healthy and the client's COMMIT committed a transaction one of whose statements had failed.
import { execFile } from 'node:child_process';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { bindMessage, executeMessage, parseMessage, queryMessage, syncMessage } from '../../src/gateway/pgwire/protocol.js';
import { openRawSession, sqlError, startWireWorld, type WireWorld } from './fixture.js';

let ww: WireWorld;
let writer: { id: number; key: string };
let reader: { id: number; key: string };
let limited: WireWorld;
let limitedReader: { id: number; key: string };

beforeAll(async () => {
  ww = await startWireWorld({ sourceId: 'txsrc' });
  writer = await ww.world.agent('tx-writer', [{ source_id: ww.sourceId, role_key: 'writer' }]);
  reader = await ww.world.agent('tx-reader', [{ source_id: ww.sourceId, role_key: 'reader' }]);
  limited = await startWireWorld({ sourceId: 'txlimsrc', env: { SERVICE_GATEWAY__LIMITS__RESULT_ROWS: '1' } });
  limitedReader = await limited.world.agent('txlim-reader', [{ source_id: limited.sourceId, role_key: 'reader' }]);
}, 90_000);
afterAll(async () => {
  await ww?.stop();
  await limited?.stop();
});

async function notes(body: string): Promise<number> {
  return ww.direct(async (d) => (await d.query('select count(*)::int as n from notes where body = $1', [body])).rows[0].n);
}

/** The command tag of COMMIT: node-postgres reports it as `command`. */
async function commit(c: pg.Client): Promise<string> {
  return (await c.query('COMMIT')).command;
}

/** Each way a statement is refused inside a block: [what, the refused call, its SQLSTATE]. */
const refusals: Array<[string, (c: pg.Client) => Promise<unknown>, string]> = [
  ['a parse error (simple protocol)', (c) => c.query('selec nonsense'), '42601'],
  ['a governance refusal (simple protocol)', (c) => c.query('SET ROLE postgres'), '42501'],
  ['a parse error (extended protocol)', (c) => c.query('selec $1', [1]), '42601'],
  ['a governance refusal at Parse (extended protocol)', (c) => c.query({ text: 'drop table notes', queryMode: 'extended' } as pg.QueryConfig), '42501'],
  ['a write queued for approval at Execute (extended protocol)', (c) => c.query('update customers set name = $1', ['X']), 'WA001'],
  ['a write queued for approval (simple protocol)', (c) => c.query("update customers set name = 'X'"), 'WA001'],
  ['a multi-statement query with one refused statement', (c) => c.query("insert into notes(body) values ('multi'); SET ROLE postgres"), '42501'],
];

describe('node-postgres', () => {
  for (const [what, refused, sqlstate] of refusals) {
    test(`${what} aborts the block: 25P02 until ROLLBACK, COMMIT answers ROLLBACK and commits nothing`, async () => {
      const body = `tx ${what}`;
      const c = await ww.client('tx-writer', writer.key);
      try {
        await c.query('BEGIN');
        await c.query('insert into notes(body) values ($1)', [body]);
        expect((await sqlError(refused(c))).code).toBe(sqlstate);
        expect((await sqlError(c.query('select 1'))).code).toBe('25P02');
        expect((await sqlError(c.query('select $1::int', [1]))).code).toBe('25P02');
        expect(await commit(c)).toBe('ROLLBACK');
        // The session is usable again, outside any block.
        expect((await c.query('select 1 as one')).rows[0].one).toBe(1);
      } finally {
        await c.end();
      }
      expect(await notes(body)).toBe(0);
      expect(await ww.direct(async (d) => (await d.query("select count(*)::int as n from customers where name = 'X'")).rows[0].n)).toBe(0);
    });
  }

  test('ROLLBACK TO SAVEPOINT leaves the failed state; work before the savepoint commits', async () => {
    const c = await ww.client('tx-writer', writer.key);
    try {
      await c.query('BEGIN');
      await c.query("insert into notes(body) values ('before savepoint')");
      await c.query('SAVEPOINT s1');
      await c.query("insert into notes(body) values ('after savepoint')");
      expect((await sqlError(c.query('SET ROLE postgres'))).code).toBe('42501');
      expect((await sqlError(c.query('select 1'))).code).toBe('25P02');
      await c.query('ROLLBACK TO SAVEPOINT s1');
      expect((await c.query('select 1 as one')).rows[0].one).toBe(1);
      expect(await commit(c)).toBe('COMMIT');
    } finally {
      await c.end();
    }
    expect(await notes('before savepoint')).toBe(1);
    expect(await notes('after savepoint')).toBe(0);
  });

  test('outside a block a refusal changes nothing: the next statement runs', async () => {
    const c = await ww.client('tx-reader', reader.key);
    try {
      expect((await sqlError(c.query("insert into notes(body) values ('reader')"))).code).toBe('42501');
      expect((await c.query('select 1 as one')).rows[0].one).toBe(1);
    } finally {
      await c.end();
    }
  });
});

describe('extended protocol, message by message', () => {
  test('a refusal in a batch rolls back the batch before it (its implicit transaction) and ignores the rest up to Sync', async () => {
    const s = await openRawSession(ww, 'tx-writer', writer.key);
    try {
      const a = await s.send(
        parseMessage('', "insert into notes(body) values ('batch before refusal')"),
        bindMessage('', '', []),
        executeMessage('', 0),
        parseMessage('', 'SET ROLE postgres'),
        parseMessage('', "insert into notes(body) values ('batch after refusal')"),
        syncMessage(),
      );
      expect(a.errors).toEqual(['42501']);
      expect(a.status).toBe('I');
      // The client's unnamed statement is not the gateway's failing one: the session goes on normally.
      const b = await s.send(parseMessage('', 'select 1'), bindMessage('', '', []), executeMessage('', 0), syncMessage());
      expect(b.errors).toEqual([]);
    } finally {
      await s.close();
    }
    expect(await notes('batch before refusal')).toBe(0);
    expect(await notes('batch after refusal')).toBe(0);
  });

  test('inside a block, ReadyForQuery says E after a refusal and T again after ROLLBACK TO SAVEPOINT', async () => {
    const s = await openRawSession(ww, 'tx-writer', writer.key);
    try {
      expect((await s.send(queryMessage('BEGIN; SAVEPOINT a'))).status).toBe('T');
      const refused = await s.send(parseMessage('s1', 'selec 1'), syncMessage());
      expect(refused.errors).toEqual(['42601']);
      expect(refused.status).toBe('E');
      expect((await s.send(queryMessage('select 1'))).errors).toEqual(['25P02']);
      expect((await s.send(queryMessage('ROLLBACK TO SAVEPOINT a'))).status).toBe('T');
      const after = await s.send(queryMessage('COMMIT'));
      expect(after.status).toBe('I');
    } finally {
      await s.close();
    }
  });

  test('an error after an upstream error in the same batch is not answered twice', async () => {
    const s = await openRawSession(ww, 'tx-writer', writer.key);
    try {
      const a = await s.send(parseMessage('', 'select 1/0'), bindMessage('', '', []), executeMessage('', 0), parseMessage('', 'SET ROLE postgres'), syncMessage());
      expect(a.errors).toEqual(['22012']);
    } finally {
      await s.close();
    }
  });
});

describe('an error the gateway answers after the upstream ran the statement (row bound)', () => {
  test('inside a block it aborts the block upstream too: COMMIT answers ROLLBACK', async () => {
    const c = await limited.client('txlim-reader', limitedReader.key);
    try {
      await c.query('BEGIN');
      expect((await sqlError(c.query('select * from customers'))).code).toBe('54000');
      expect((await sqlError(c.query('select 1'))).code).toBe('25P02');
      expect(await commit(c)).toBe('ROLLBACK');
      await c.query('BEGIN');
      expect((await sqlError(c.query('select * from customers where id > $1', [0]))).code).toBe('54000');
      expect((await sqlError(c.query('select 1'))).code).toBe('25P02');
      await c.query('ROLLBACK');
      expect((await c.query('select 1 as one')).rows[0].one).toBe(1);
    } finally {
      await c.end();
    }
  });
});

describe('psql', () => {
  test('a refused statement in a script block: later statements fail, COMMIT answers ROLLBACK', async () => {
    const script = "BEGIN;\ninsert into notes(body) values ('psql block');\nSET ROLE postgres;\nselect 1;\nCOMMIT;\n";
    const r = await ww.psql('tx-writer', writer.key, ['-v', 'ON_ERROR_STOP=0', '-f', '-'], script);
    expect(r.stderr).toContain('current transaction is aborted');
    expect(r.stdout).toContain('ROLLBACK');
    expect(await notes('psql block')).toBe(0);
  });
});

describe('psycopg2', () => {
  test('a refused statement aborts the transaction: InFailedSqlTransaction, and commit commits nothing', async () => {
    const script = `
import psycopg2, sys
c = psycopg2.connect(host='127.0.0.1', port=${ww.port}, user='tx-writer', password=sys.argv[1], dbname='${ww.sourceId}', sslmode='disable')
cur = c.cursor()
cur.execute("insert into notes(body) values (%s)", ('psycopg2 block',))
try:
    cur.execute('SET ROLE postgres')
except psycopg2.Error as e:
    print('refused', e.pgcode)
try:
    cur.execute('select 1')
except psycopg2.Error as e:
    print('then', e.pgcode)
c.commit()
cur.execute('select 1')
print('after', cur.fetchone()[0])
c.close()
`;
    const r = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
      execFile('/usr/bin/python3', ['-c', script, writer.key], { timeout: 30_000 }, (_err, stdout, stderr) => resolve({ stdout, stderr }));
    });
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain('refused 42501');
    expect(r.stdout).toContain('then 25P02');
    expect(r.stdout).toContain('after 1');
    expect(await notes('psycopg2 block')).toBe(0);
  });
});
