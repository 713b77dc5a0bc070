// A NOTICE raised while a statement reads redacted columns must not carry their values: to_tsquery quotes an input without lexemes, so whitespace runs spell a redacted value digit by digit.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { initSqlParser } from '../../src/governance/sql/index.js';
import { startWireWorld, type WireWorld } from './fixture.js';

const SETUP = `
create table customers (id int primary key, name text, ssn text);
insert into customers values (1, 'Ada', '123-45-6789');
`;

let ww: WireWorld;
let agent: { id: number; key: string };

/** Each digit of ssn becomes a tab, that many spaces and a tab: whitespace only, so PostgreSQL's NOTICE quotes it whole. */
const SPELL = `select to_tsquery('simple', ${'0123456789'.split('').reduce((e, d) => `replace(${e}, '${d}', E'\\t${' '.repeat(Number(d))}\\t')`, "replace(ssn, '-', '')")}) from customers`;

function decode(text: string): string {
  return [...text.matchAll(/\t( *)\t/g)].map((m) => String(m[1]!.length)).join('');
}

beforeAll(async () => {
  await initSqlParser();
  ww = await startWireWorld({ sourceId: 'noticesrc', setupSql: SETUP });
  const role = await ww.world.admin('POST', `/api/data-sources/${ww.sourceId}/roles`, {
    role_key: 'notice-reader',
    rules: { sql: [{ operations: ['read'], tables: ['public.customers'] }] },
  });
  if (role.status >= 300) throw new Error(`role: ${role.status} ${role.text}`);
  agent = await ww.world.agent('notice-agent', [{ source_id: ww.sourceId, role_key: 'notice-reader' }]);
  await ww.world.policy({ name: 'redact ssn', conditions: { identity_ids: [agent.id] }, actions: { effect: 'allow', redact_columns: ['ssn'] } });
}, 90_000);
afterAll(async () => {
  await ww?.stop();
});

test('the NOTICE of a statement that reads a redacted column keeps its SQLSTATE, not its text (node-postgres)', async () => {
  const c = await ww.client('notice-agent', agent.key);
  const notices: Array<{ message: string; code?: string }> = [];
  c.on('notice', (n) => notices.push({ message: n.message ?? '', code: (n as { code?: string }).code }));
  try {
    // The encoding works: straight at PostgreSQL the notice spells the value.
    const spelled = await ww.direct(async (d) => {
      const seen: string[] = [];
      d.on('notice', (n) => seen.push(n.message ?? ''));
      await d.query(SPELL);
      return seen.join('\n');
    });
    expect(decode(spelled)).toBe('123456789');
    await c.query(SPELL);
    await c.query({ text: `${SPELL} where $1`, values: [true] });
    expect(notices).toHaveLength(2);
    for (const n of notices) {
      expect(n.code).toBe('00000');
      expect(decode(n.message)).toBe('');
      expect(n.message).not.toContain('\t');
    }
  } finally {
    await c.end();
  }
});

test('psql: the same statement, and a notice of a statement over no redacted column keeps its text', async () => {
  const r = await ww.psql('notice-agent', agent.key, ['-A', '-v', 'VERBOSITY=verbose', '-c', SPELL, '-c', "select to_tsquery('simple', '   ') as plain"]);
  expect(decode(r.stderr)).toBe('');
  expect(r.stderr).toContain(`text-search query doesn't contain lexemes: "   "`);
});
