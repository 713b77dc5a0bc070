// Drift between two snapshots (pure): added, removed, renamed and changed schemas, relations, columns and HTTP operations, each with a stable change_id; nothing a cap left unreached is called removed (spec §8); a rename is one only where the source's identity (oid, attnum) proves it.
import { createHash } from 'node:crypto';
import type { CatalogColumn, CatalogRelation, CatalogStructure, ObjectType } from './model.js';
import { parsePath, pathOf } from './model.js';

export type ChangeKind = 'added' | 'removed' | 'renamed' | 'changed' | 'type_changed';

export interface CatalogChange {
  /** Derived from the source and what changed: the same change computed again has the same id. */
  readonly change_id: string;
  readonly kind: ChangeKind;
  readonly object_type: ObjectType;
  readonly path: string;
  /** Segments of the path, unquoted: [schema], [schema, relation] or [schema, relation, column]; [method, path] for an operation. */
  readonly segments: readonly string[];
  readonly detail: Readonly<Record<string, string | boolean | null>>;
}

export function changeId(sourceId: string, kind: ChangeKind, objectType: ObjectType, path: string, detail: Readonly<Record<string, unknown>>): string {
  const keys = Object.keys(detail).sort();
  const canonical = JSON.stringify(keys.map((k) => [k, detail[k]]));
  return createHash('sha256').update(`${sourceId}\n${kind}\n${objectType}\n${path}\n${canonical}`).digest('hex').slice(0, 24);
}

const relKey = (schema: string, name: string) => `${schema}\u0000${name}`;

function change(sourceId: string, kind: ChangeKind, objectType: ObjectType, segments: readonly string[], detail: Record<string, string | boolean | null> = {}): CatalogChange {
  const path = objectType === 'operation' ? `${segments[0]} ${segments[1]}` : pathOf(...segments);
  return { change_id: changeId(sourceId, kind, objectType, path, detail), kind, object_type: objectType, path, segments, detail };
}

function diffColumns(sourceId: string, before: CatalogRelation, after: CatalogRelation, out: CatalogChange[]): void {
  const old = new Map<string, CatalogColumn>();
  for (const c of before.columns) old.set(c.name, c);
  const now = new Set(after.columns.map((c) => c.name));
  // A column whose name is gone and whose attnum now carries another name was renamed (attnums are never reused in a relation).
  const goneByAttnum = new Map<number, CatalogColumn>();
  for (const o of before.columns) if (o.attnum !== undefined && !now.has(o.name)) goneByAttnum.set(o.attnum, o);
  const renamedFrom = new Set<string>();
  for (const c of after.columns) {
    let o = old.get(c.name);
    const segs = [after.schema, after.name, c.name];
    if (o === undefined) {
      const was = c.attnum === undefined ? undefined : goneByAttnum.get(c.attnum);
      if (was !== undefined) {
        renamedFrom.add(was.name);
        out.push(change(sourceId, 'renamed', 'column', segs, { from: was.name }));
        o = was;
      } else {
        // Only when the previous scan read this relation whole: otherwise the column may simply not have been reached.
        if (before.complete) out.push(change(sourceId, 'added', 'column', segs, { type: c.type, nullable: c.nullable, has_default: c.has_default }));
        continue;
      }
    }
    if (o.type !== c.type) out.push(change(sourceId, 'type_changed', 'column', segs, { before: o.type, after: c.type }));
    if (o.nullable !== c.nullable || o.has_default !== c.has_default) {
      out.push(change(sourceId, 'changed', 'column', segs, { nullable_before: o.nullable, nullable_after: c.nullable, has_default_before: o.has_default, has_default_after: c.has_default }));
    }
  }
  if (!after.complete) return;
  for (const o of before.columns) if (!now.has(o.name) && !renamedFrom.has(o.name)) out.push(change(sourceId, 'removed', 'column', [after.schema, after.name, o.name], { type: o.type }));
}

/**
 * The changes from `before` to `after`, in a stable order (schemas, relations, columns by name). An object missing
 * from `after` is removed only where `after` read its container whole; an object missing from `before` is added only
 * where `before` did (a cap reached on the earlier scan would otherwise make everything past it look new).
 */
export function diffStructures(sourceId: string, before: CatalogStructure, after: CatalogStructure): CatalogChange[] {
  const out: CatalogChange[] = [];
  const oldSchemas = new Map(before.schemas.map((s) => [s.name, s.complete]));
  const newSchemas = new Map(after.schemas.map((s) => [s.name, s.complete]));
  // ALTER SCHEMA … RENAME keeps the namespace's oid: proven renames, not a removal and an addition.
  const goneSchemaByOid = new Map<string, string>();
  for (const s of before.schemas) if (s.oid !== undefined && !newSchemas.has(s.name)) goneSchemaByOid.set(s.oid, s.name);
  const renamedSchemas = new Set<string>();
  for (const s of after.schemas) {
    if (oldSchemas.has(s.name)) continue;
    const was = s.oid === undefined ? undefined : goneSchemaByOid.get(s.oid);
    if (was !== undefined) {
      renamedSchemas.add(was);
      out.push(change(sourceId, 'renamed', 'schema', [s.name], { from: pathOf(was) }));
    } else if (before.schemas_complete) out.push(change(sourceId, 'added', 'schema', [s.name]));
  }
  if (after.schemas_complete) for (const s of before.schemas) if (!newSchemas.has(s.name) && !renamedSchemas.has(s.name)) out.push(change(sourceId, 'removed', 'schema', [s.name]));

  // Whether a scan read a schema's relations whole: for a schema it does not list, whether it read the schema list whole.
  const readWhole = (schemas: Map<string, boolean>, listComplete: boolean, schema: string) => schemas.get(schema) ?? listComplete;

  const oldRels = new Map<string, CatalogRelation>();
  for (const r of before.relations) oldRels.set(relKey(r.schema, r.name), r);
  const newKeys = new Set(after.relations.map((r) => relKey(r.schema, r.name)));
  // A relation whose name is gone and whose oid now carries another name (or schema) was renamed or moved.
  const goneByOid = new Map<string, CatalogRelation>();
  for (const o of before.relations) if (o.oid !== undefined && !newKeys.has(relKey(o.schema, o.name))) goneByOid.set(o.oid, o);
  const renamed = new Set<string>();
  for (const r of after.relations) {
    const key = relKey(r.schema, r.name);
    let o = oldRels.get(key);
    if (o === undefined) {
      const was = r.oid === undefined ? undefined : goneByOid.get(r.oid);
      if (was === undefined) {
        if (readWhole(oldSchemas, before.schemas_complete, r.schema)) out.push(change(sourceId, 'added', r.kind, [r.schema, r.name]));
        continue;
      }
      renamed.add(relKey(was.schema, was.name));
      out.push(change(sourceId, 'renamed', r.kind, [r.schema, r.name], { from: pathOf(was.schema, was.name) }));
      o = was;
    }
    if (o.kind !== r.kind) out.push(change(sourceId, 'changed', r.kind, [r.schema, r.name], { kind_before: o.kind, kind_after: r.kind }));
    diffColumns(sourceId, o, r, out);
  }
  for (const o of before.relations) {
    const key = relKey(o.schema, o.name);
    if (newKeys.has(key) || renamed.has(key)) continue;
    if (readWhole(newSchemas, after.schemas_complete, o.schema)) out.push(change(sourceId, 'removed', o.kind, [o.schema, o.name]));
  }

  // HTTP operations (OpenAPI): a capped document says nothing of what it did not reach.
  const beforeWhole = before.truncated_by === null;
  const afterWhole = after.truncated_by === null;
  const oldOps = new Map(before.operations.map((op) => [`${op.method} ${op.path}`, op]));
  const newOps = new Set<string>();
  for (const op of after.operations) {
    const key = `${op.method} ${op.path}`;
    newOps.add(key);
    const o = oldOps.get(key);
    if (o === undefined) {
      if (beforeWhole) out.push(change(sourceId, 'added', 'operation', [op.method, op.path]));
      continue;
    }
    if (!beforeWhole || !afterWhole) continue;
    const was = new Set(o.response_properties);
    const added = op.response_properties.filter((p) => !was.has(p));
    const now = new Set(op.response_properties);
    const removed = o.response_properties.filter((p) => !now.has(p));
    if (added.length > 0 || removed.length > 0) out.push(change(sourceId, 'changed', 'operation', [op.method, op.path], { properties_added: added.join(',') || null, properties_removed: removed.join(',') || null }));
  }
  if (afterWhole) for (const o of before.operations) if (!newOps.has(`${o.method} ${o.path}`)) out.push(change(sourceId, 'removed', 'operation', [o.method, o.path]));
  return out;
}

/**
 * Annotations that follow a proven rename: a classification of `public.users.email` is carried to `public.people.email`
 * when the scan proves `public.users` became `public.people` (relation renames first, then column renames within the
 * new names). Answers the new [path, classification] pairs not already annotated; the old rows stay.
 */
export function carriedAnnotations(annotations: ReadonlyArray<{ path: string; classification: string }>, changes: readonly CatalogChange[]): Array<{ path: string; classification: string }> {
  const current = new Map<string, { segs: string[]; classification: string }>();
  for (const a of annotations) {
    const segs = parsePath(a.path);
    if (segs !== null && segs.length === 3) current.set(pathOf(...segs), { segs, classification: a.classification });
  }
  const existing = new Set(current.keys());
  const moved = new Map<string, string>();
  const apply = (from: readonly string[], to: readonly string[]) => {
    for (const { segs, classification } of [...current.values()]) {
      if (!from.every((s, i) => segs[i] === s)) continue;
      const next = [...to, ...segs.slice(from.length)];
      const path = pathOf(...next);
      if (!current.has(path)) current.set(path, { segs: next, classification });
      if (!existing.has(path)) moved.set(path, classification);
    }
  };
  const relationRenames = changes.filter((c) => c.kind === 'renamed' && c.object_type !== 'column' && c.object_type !== 'schema' && c.object_type !== 'operation');
  for (const c of relationRenames) {
    const from = parsePath(String(c.detail.from));
    if (from !== null && from.length === 2) apply(from, c.segments);
  }
  for (const c of changes) {
    if (c.kind !== 'renamed' || c.object_type !== 'column') continue;
    apply([c.segments[0]!, c.segments[1]!, String(c.detail.from)], c.segments);
  }
  return [...moved].map(([path, classification]) => ({ path, classification }));
}
