// The `columns` stage: loads a source's structure only when a column, table or redaction rule may apply, refuses when it cannot be loaded (fail closed), and drops it for DDL.
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { resolveColumns } from '../../src/pipeline/columns.js';
import { SqlClassifier, initSqlParser } from '../../src/governance/sql/index.js';
import { compilePolicies } from '../../src/governance/policy/index.js';
import { buildStructure } from '../../src/governance/sql/structure.js';
import { SourceStructures } from '../../src/connectors/postgres-structure.js';
import type { GovernedRequest, PipelineDeps } from '../../src/pipeline/context.js';
import type { RegisteredSource } from '../../src/registry/sources.js';

let classifier: SqlClassifier;
const source = { source_id: 'src' } as RegisteredSource;
const structure = () =>
  buildStructure([{ oid: '1', schema: 'public', name: 'customers', relkind: 'r', definition: null, columns: JSON.stringify([[1, 'id'], [2, 'secret_code']]) }]);

function request(sql: string): GovernedRequest & { reasons: string[] } {
  const c = classifier.classify(sql);
  if (!c.ok) throw new Error(c.error.message);
  const reasons: string[] = [];
  const audit = { addReason: (r: string) => reasons.push(r), set: () => undefined };
  return { channel: 'pgwire', requestId: 'r', clientIp: null, sourceId: 'src', credential: { kind: 'bearer', authorization: undefined }, action: { kind: 'sql', sql, params: [] }, audit, sql: c, operation: c.operation, tables: c.tables, columns: c.columns, source, reasons } as never;
}

function deps(policies: unknown[], load: () => Promise<ReturnType<typeof structure>>): { deps: PipelineDeps; structures: SourceStructures } {
  const set = compilePolicies(policies.map((p, i) => ({ id: i + 1, name: `p${i}`, priority: 0, enabled: true, ...(p as object) })) as never, { version: 1 });
  const structures = new SourceStructures({ load, ttlMs: 60_000 });
  return { structures, deps: { policies: () => set, structures, log: { warn: () => undefined } } as unknown as PipelineDeps };
}

const denySecret = { conditions: { columns: ['secret_code'] }, actions: { effect: 'deny' } };

afterEach(() => {
  vi.useRealTimers();
});

beforeAll(async () => {
  await initSqlParser();
  classifier = new SqlClassifier();
});

describe('resolveColumns', () => {
  it('resolves a star to the columns behind it', async () => {
    const { deps: d } = deps([denySecret], async () => structure());
    const req = request('select * from customers');
    await resolveColumns.run(req, d);
    expect(req.columns).toEqual(expect.arrayContaining(['public.customers.id', 'public.customers.secret_code']));
    expect(req.columnAnalysis?.statements).toHaveLength(1);
  });

  it('refuses a statement over tables when the structure cannot be loaded (fail closed)', async () => {
    const { deps: d } = deps([denySecret], async () => Promise.reject(new Error('catalog unreachable')));
    const req = request('select id from customers');
    await expect(Promise.resolve(resolveColumns.run(req, d))).rejects.toMatchObject({ code: 'forbidden' });
    expect(req.reasons).toContain('columns: source structure unavailable');
  });

  it('refuses what it cannot resolve while a column rule applies', async () => {
    const { deps: d } = deps([denySecret], async () => structure());
    await expect(Promise.resolve(resolveColumns.run(request('select * from created_elsewhere'), d))).rejects.toMatchObject({ code: 'forbidden' });
  });

  it('loads nothing without column, table or redaction rules, or without a table', async () => {
    let loads = 0;
    const counting = async () => (loads++, structure());
    await resolveColumns.run(request('select * from customers'), deps([{ conditions: {}, actions: { effect: 'allow' } }], counting).deps);
    await resolveColumns.run(request('select 1'), deps([denySecret], counting).deps);
    expect(loads).toBe(0);
  });

  it('a relation the cached structure lacks reloads it, at most every few seconds', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    let withX = false;
    const load = async () =>
      buildStructure([
        { oid: '1', schema: 'public', name: 'customers', relkind: 'r', definition: null, columns: JSON.stringify([[1, 'id'], [2, 'secret_code']]) },
        ...(withX ? [{ oid: '2', schema: 'public', name: 'x', relkind: 'r', definition: null, columns: JSON.stringify([[1, 'a']]) }] : []),
      ]);
    const { deps: d, structures } = deps([denySecret], load);
    await resolveColumns.run(request('select id from customers'), d);
    withX = true;
    // Loaded a moment ago: a name it lacks does not reload it (a name that never exists cannot cost a load per statement).
    await expect(Promise.resolve(resolveColumns.run(request('select * from x'), d))).rejects.toMatchObject({ code: 'forbidden' });
    expect(structures.loads).toBe(1);
    vi.setSystemTime(Date.now() + 6_000);
    const req = request('select * from x');
    await resolveColumns.run(req, d);
    expect(structures.loads).toBe(2);
    expect(req.columns).toContain('public.x.a');
  });

  it('a DDL statement drops the cached structure: the next statement loads it again', async () => {
    const { deps: d, structures } = deps([denySecret], async () => structure());
    await resolveColumns.run(request('select id from customers'), d);
    await resolveColumns.run(request('select id from customers'), d);
    expect(structures.loads).toBe(1);
    await resolveColumns.run(request('create table t2 (x int)'), d);
    await resolveColumns.run(request('select id from customers'), d);
    expect(structures.loads).toBe(2);
  });
});
