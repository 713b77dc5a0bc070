// A WITH HOLD cursor over redacted columns runs its query when its transaction commits: the error of that run (COMMIT, END, the Sync of an implicit transaction) must not quote a redacted value.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { initSqlParser } from '../../src/governance/sql/index.js';
import { sqlError, startWireWorld, type WireWorld } from './fixture.js';

const SETUP = `
create table customers (id int primary key, name text, email text, ssn text, secret_code text);
insert into customers values (1, 'Ada', 'ada.qmailtok@example.com', '123-45-6789', 'qsecrettok-ada'), (2, 'Bob', 'bob.qmailtok@example.com', '987-65-4321', 'qsecrettok-bob');
`;
const TOKENS = ['qmailtok', '45-6789', '65-4321', 'qsecrettok'];

let ww: WireWorld;
let agent: { id: number; key: string };

function leaks(text: string): string[] {
  return TOKENS.filter((k) => text.toLowerCase().includes(k));
}

beforeAll(async () => {
  await initSqlParser();
  ww = await startWireWorld({ sourceId: 'heldsrc', setupSql: SETUP });
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'held-reader',
    rules: { sql: [{ operations: ['read'], tables: ['public.customers'] }] },
  });
  if (role.status >= 300) throw new Error(`role: ${role.status} ${role.text}`);
  agent = await ww.world.agent('held-agent', [{ source_id: ww.sourceId, role_key: 'held-reader' }]);
  await ww.world.policy({ name: 'redact personal columns', conditions: { identity_ids: [agent.id] }, actions: { effect: 'allow', redact_columns: ['ssn', 'email'] } });
}, 90_000);
afterAll(async () => {
  await ww?.stop();
});

describe('the materialization of a WITH HOLD cursor keeps redacted values out of error messages', () => {
  test.each(['commit', 'end', 'commit and chain'])('psql: declare … with hold, then %s', async (ending) => {
    const input = `begin;\ndeclare held cursor with hold for select id, ssn::int, email::int from customers;\n${ending};\nrollback;\nselect 1 as still_here;\n`;
    const r = await ww.psql('held-agent', agent.key, ['-A', '-v', 'VERBOSITY=verbose'], input);
    const out = `${r.stdout}\n${r.stderr}`;
    expect(out).toContain('DECLARE CURSOR');
    // The failure itself is reported (its SQLSTATE), only its text is withheld; the session goes on.
    expect(out).toContain('22P02');
    expect(out).toContain('still_here');
    expect(leaks(out)).toEqual([]);
  });

  test('extended protocol: a held cursor declared outside a block fails at Sync without its message', async () => {
    const c = await ww.client('held-agent', agent.key);
    try {
      const err = await sqlError(c.query({ text: 'declare held2 cursor with hold for select ssn::int from customers where $1', values: [true] }));
      expect(err.code).toBe('22P02');
      expect(leaks(`${err.message} ${err.detail ?? ''} ${err.hint ?? ''}`)).toEqual([]);
      // Once the session is idle again, an error that quotes no redacted column keeps its message.
      const plain = await sqlError(c.query({ text: "select 'abc'::int where $1", values: [true] }));
      expect(plain.message).toContain('invalid input syntax for type integer');
    } finally {
      await c.end();
    }
  });
});
