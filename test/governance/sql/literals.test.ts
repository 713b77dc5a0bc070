// The literal-free text (audit entries, approval summaries): no literal or comment survives, in any statement kind.
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { SqlClassifier, initSqlParser } from '../../../src/governance/sql/index.js';

let classifier: SqlClassifier;

beforeAll(async () => {
  await initSqlParser();
  classifier = new SqlClassifier({ cacheSize: 0 });
});

function normalized(sql: string): string {
  const r = classifier.classify(sql);
  if (!r.ok) throw new Error(`${sql}: ${r.error.message}`);
  return r.normalized;
}

/** Statement kinds the approval list shows; `$S` is a string literal, `$N` a number. */
const KINDS = [
  'prepare p as update customers set email = $S where id = $N',
  'prepare p(int) as insert into notes (body) values ($S)',
  'execute p($S, $N)',
  'copy (select $S, $N from customers) to stdout',
  'copy notes from stdin with (format csv, null $S, delimiter $S)',
  'with d as (update customers set email = $S where id = $N returning *) select * from d',
  'with x as (select $S as v) insert into notes (body) select v from x',
  'create table t as select $S as v, $N as n',
  'create view v as select $S as v',
  'create table t (a text default $S, b int default $N)',
  'comment on table customers is $S',
  'update customers set email = $S where id = $N',
  'merge into customers c using (select $N as id, $S as e) s on c.id = s.id when matched then update set email = s.e',
  'explain analyze update customers set email = $S',
  'declare c cursor for select * from customers where email = $S',
  'insert into notes (body) values ($S) -- $S',
  'select /* $S */ 1',
  'select $1, $S',
];

const secret = fc.stringMatching(/^[A-Za-z0-9@._ -]{6,24}$/).map((s) => `Zq${s}`);
const quoted = (s: string) => fc.constantFrom(`'${s}'`, `E'${s}'`, `$$${s}$$`, `$tag$${s}$tag$`, `U&'${s}'`);

describe('normalized text', () => {
  it('keeps no literal of any statement kind, however it is quoted', () => {
    fc.assert(
      fc.property(fc.constantFrom(...KINDS), secret.chain((s) => fc.tuple(fc.constant(s), quoted(s))), fc.integer({ min: 100_000, max: 999_999_999 }), (kind, [s, lit], n) => {
        const sql = kind.replaceAll('$S', () => lit).replaceAll('$N', () => String(n));
        const text = normalized(sql);
        expect(text, sql).not.toContain(s);
        expect(text, sql).not.toContain(String(n));
      }),
      { numRuns: 500 },
    );
  });

  it('numbers the replacements after the parameters the text already has, and keeps the structure', () => {
    expect(normalized("prepare p as update customers set email = 'a@b.c' where id = 42")).toBe('prepare p as update customers set email = $1 where id = $2');
    expect(normalized("select $2, 'x' -- note")).toBe('select $2, $3');
    expect(normalized("execute p('secret', 7)")).toBe('execute p($1, $2)');
  });
});
