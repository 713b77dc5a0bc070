// The pure risk rule: a measured write above the source's thresholds (rows, share of a table) is high risk whatever its syntax, an unmeasured one is too (fail closed), and which statements are measured at all.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { approvalVerdict, assessRisk, effectRisks, grownSinceApproval, needsWriteEstimate, type WriteEstimate } from '../../src/governance/risk.js';
import { tablesToSize } from '../../src/connectors/postgres-effects.js';

const T = { max_rows: 1000, max_table_share: 0.5, share_min_rows: 10 };
const update = (rows: number, tableRows: number): WriteEstimate => ({ ok: true, rows, tables: [{ table: 'public.t', operation: 'update', rows, tableRows }] });
const sqlWrite = (effect?: { estimate: WriteEstimate; thresholds: typeof T }) =>
  assessRisk({ kind: 'sql', operation: 'write', statementKinds: ['update'], unboundedWrite: false, multiStatement: false, ...(effect ? { effect } : {}) });

describe('effectRisks', () => {
  it('is high above max_rows, or above max_table_share of a table, and quiet within both', () => {
    expect(effectRisks(update(5, 10_000), T)).toEqual([]);
    expect(effectRisks(update(1001, 1_000_000), T)).toEqual(['writes about 1001 rows (more than max_rows 1000)']);
    expect(effectRisks(update(60, 100), T)).toEqual(['update of about 60% of public.t (more than max_table_share 0.5)']);
  });

  it('leaves small writes to the row rule: one row of a one-row table, ten of a ten-row table', () => {
    expect(effectRisks(update(1, 1), T)).toEqual([]);
    expect(effectRisks(update(10, 10), T)).toEqual([]);
    expect(effectRisks(update(11, 11), T)).toHaveLength(1);
  });

  it('does not measure inserts against the table (they add rows), but counts their rows', () => {
    const insert: WriteEstimate = { ok: true, rows: 3, tables: [{ table: 'public.t', operation: 'insert', rows: 3, tableRows: null }] };
    expect(effectRisks(insert, T)).toEqual([]);
    expect(effectRisks({ ...insert, rows: 2000 }, T)).toHaveLength(1);
  });

  it('adds up several writes to one table (a CTE and its outer statement)', () => {
    const two: WriteEstimate = {
      ok: true,
      rows: 80,
      tables: [
        { table: 'public.t', operation: 'update', rows: 40, tableRows: 100 },
        { table: 'public.t', operation: 'delete', rows: 40, tableRows: 100 },
      ],
    };
    expect(effectRisks(two, T)).toEqual(['update/delete of about 80% of public.t (more than max_table_share 0.5)']);
  });

  it('an unmeasured write is a reason of its own (fail closed)', () => {
    expect(effectRisks({ ok: false, reason: 'timed out' }, T)).toEqual(['write effect could not be estimated (timed out)']);
  });

  it('property: any estimate above either threshold makes the write high risk and queues it under by_risk', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), fc.integer({ min: 0, max: 10_000_000 }), (rows, tableRows) => {
        const risk = sqlWrite({ estimate: update(rows, tableRows), thresholds: T });
        const over = rows > T.max_rows || (rows > T.share_min_rows && rows / Math.max(tableRows, 1) > T.max_table_share);
        expect(risk.level === 'high').toBe(over);
        expect(approvalVerdict({ isWrite: true, policyEffect: 'allow', roleApproval: 'by_risk', risk }).required).toBe(over);
      }),
    );
  });
});

describe('the table sizes a write estimate looks up (tablesToSize)', () => {
  it('property: sizing only the tables it names gives the decision that sizing every table would', () => {
    const target = fc.record({
      schema: fc.constant('public'),
      name: fc.constantFrom('a', 'b', 'c'),
      operation: fc.constantFrom('update' as const, 'delete' as const, 'merge' as const, 'insert' as const),
      rows: fc.oneof(fc.integer({ min: 0, max: 30 }), fc.double({ min: 0, max: 30, noNaN: true })),
    });
    fc.assert(
      fc.property(fc.array(target, { minLength: 1, maxLength: 5 }), fc.integer({ min: 0, max: 20 }), fc.integer({ min: 1, max: 60 }), (targets, shareMinRows, size) => {
        const thresholds = { ...T, share_min_rows: shareMinRows };
        const sized = tablesToSize(targets, shareMinRows);
        const estimate = (sizeOf: (table: string) => number | null): WriteEstimate => ({
          ok: true,
          rows: targets.reduce((n, t) => n + t.rows, 0),
          tables: targets.map((t) => ({ table: `${t.schema}.${t.name}`, operation: t.operation, rows: t.rows, tableRows: t.operation === 'insert' ? null : sizeOf(`${t.schema}.${t.name}`) })),
        });
        const everyTable = effectRisks(estimate(() => size), thresholds);
        const namedOnly = effectRisks(estimate((table) => (sized.has(table) ? size : null)), thresholds);
        expect(namedOnly).toEqual(everyTable);
        // A table the write touches by more than share_min_rows rows is always sized.
        for (const t of targets) {
          const rewritten = targets.filter((x) => x.name === t.name && x.operation !== 'insert').reduce((n, x) => n + x.rows, 0);
          if (rewritten > shareMinRows) expect(sized.has(`public.${t.name}`)).toBe(true);
        }
      }),
    );
  });
});

describe('needsWriteEstimate', () => {
  const base = { operation: 'write', traps: [] as string[], multiStatement: false };
  it('measures single row-writing statements, including writable CTEs and EXPLAIN ANALYZE of a write', () => {
    for (const kind of ['insert', 'update', 'delete', 'merge']) expect(needsWriteEstimate({ ...base, statementKinds: [kind] })).toBe(true);
    expect(needsWriteEstimate({ ...base, statementKinds: ['select'], traps: ['writable_cte'] })).toBe(true);
    expect(needsWriteEstimate({ ...base, statementKinds: ['explain'], traps: ['explain_analyze_write'] })).toBe(true);
  });
  it('leaves reads, several statements (already high) and writes the planner cannot count to their own rules', () => {
    expect(needsWriteEstimate({ ...base, operation: 'read', statementKinds: ['select'] })).toBe(false);
    expect(needsWriteEstimate({ ...base, statementKinds: ['update', 'update'], multiStatement: true })).toBe(false);
    expect(needsWriteEstimate({ ...base, statementKinds: ['copy'], traps: ['copy_from'] })).toBe(false);
  });
});

describe('grownSinceApproval', () => {
  it('holds back only a change of scale: above twice the approved rows and above them plus max_rows', () => {
    expect(grownSinceApproval(1500, update(2900, 10_000), T)).toBeNull();
    expect(grownSinceApproval(10, update(1010, 10_000), T)).toBeNull();
    expect(grownSinceApproval(10, update(1011, 10_000), T)).toBe('writes about 1011 rows now; about 10 were approved');
    expect(grownSinceApproval(1500, update(5500, 10_000), T)).toMatch(/about 5500 rows now/);
  });
  it('does not judge without both figures (nothing shown, or nothing measured now)', () => {
    expect(grownSinceApproval(null, update(1_000_000, 1_000_000), T)).toBeNull();
    expect(grownSinceApproval(10, { ok: false, reason: 'timed out' }, T)).toBeNull();
  });
});
