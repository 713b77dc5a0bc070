// Renames proven by identity (pg_class oid, pg_namespace oid, attnum) are reported as renames, never as a removal and an addition, and classifications follow them (pure, generated cases).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { carriedAnnotations, diffStructures } from '../../src/catalog/diff.js';
import type { CatalogRelation, CatalogStructure } from '../../src/catalog/model.js';
import { pathOf } from '../../src/catalog/model.js';

const col = (name: string, attnum: number) => ({ name, type: 'text', nullable: true, has_default: false, attnum });
const rel = (oid: string, schema: string, name: string, cols: string[]): CatalogRelation => ({
  oid, schema, name, kind: 'table', partition_of: null, columns: cols.map((c, i) => col(c, i + 1)), primary_key: null, foreign_keys: [], complete: true,
});
const structure = (schemas: Array<[string, string]>, relations: CatalogRelation[]): CatalogStructure => ({
  kind: 'sql', schemas: schemas.map(([oid, name]) => ({ oid, name, complete: true })), schemas_complete: true, relations, operations: [], truncated_by: null, node_count: 0,
});

// Identifiers as PostgreSQL allows them, including quotes, dots, capitals and markup.
const ident = fc.string({ minLength: 1, maxLength: 12 }).filter((s) => !s.includes('\u0000'));

describe('renames by identity', () => {
  it('a relation renamed and moved to another schema, and a column renamed, are renames; the rest unchanged', () => {
    fc.assert(
      fc.property(ident, ident, ident, ident, ident, (table, newTable, column, newColumn, other) => {
        fc.pre(table !== newTable && column !== newColumn && other !== column && other !== newColumn);
        const before = structure([['1', 'public'], ['2', 'sales']], [rel('10', 'public', table, [column, other])]);
        const after = structure([['1', 'public'], ['2', 'sales']], [rel('10', 'sales', newTable, [newColumn, other])]);
        const changes = diffStructures('s', before, after);
        expect(changes.map((c) => `${c.kind} ${c.object_type} ${c.path}`).sort()).toEqual([`renamed column ${pathOf('sales', newTable, newColumn)}`, `renamed table ${pathOf('sales', newTable)}`].sort());
        expect(changes.find((c) => c.object_type === 'table')!.detail).toEqual({ from: pathOf('public', table) });
        // The classification of the old column follows it; an unrelated one stays where it was.
        const carried = carriedAnnotations([{ path: pathOf('public', table, column), classification: 'email' }, { path: pathOf('public', table, other), classification: 'name' }], changes);
        expect(carried).toEqual(expect.arrayContaining([{ path: pathOf('sales', newTable, newColumn), classification: 'email' }, { path: pathOf('sales', newTable, other), classification: 'name' }]));
      }),
    );
  });

  it('without identity (older snapshots) or with another oid it stays a removal and an addition', () => {
    const before = structure([['1', 'public']], [rel('10', 'public', 'a', ['x'])]);
    const after = structure([['1', 'public']], [rel('11', 'public', 'b', ['x'])]);
    expect(diffStructures('s', before, after).map((c) => `${c.kind} ${c.path}`).sort()).toEqual(['added public.b', 'removed public.a']);
    const legacy = { ...before, relations: [{ ...before.relations[0]!, oid: undefined }] } as CatalogStructure;
    expect(diffStructures('s', legacy, { ...after, relations: [{ ...after.relations[0]!, oid: '10' }] }).map((c) => c.kind).sort()).toEqual(['added', 'removed']);
    // A dropped column and a new one take different attnums: not a rename.
    const dropAdd = structure([['1', 'public']], [{ ...rel('10', 'public', 'a', []), columns: [col('y', 2)] }]);
    expect(diffStructures('s', structure([['1', 'public']], [rel('10', 'public', 'a', ['x'])]), dropAdd).map((c) => `${c.kind} ${c.path}`).sort()).toEqual(['added public.a.y', 'removed public.a.x']);
  });

  it('ALTER SCHEMA … RENAME is a schema rename with its relations renamed', () => {
    const before = structure([['1', 'crm']], [rel('10', 'crm', 't', ['x'])]);
    const after = structure([['1', 'crm2']], [rel('10', 'crm2', 't', ['x'])]);
    const changes = diffStructures('s', before, after);
    expect(changes.map((c) => `${c.kind} ${c.object_type} ${c.path} ${JSON.stringify(c.detail)}`).sort()).toEqual(['renamed schema crm2 {"from":"crm"}', 'renamed table crm2.t {"from":"crm.t"}']);
    expect(carriedAnnotations([{ path: 'crm.t.x', classification: 'ssn' }], changes)).toEqual([{ path: 'crm2.t.x', classification: 'ssn' }]);
  });
});
