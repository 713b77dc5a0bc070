// What a capped scan stores (pure): the part it reached, and from the snapshot before it the part it did not, so the next diff still knows of objects no scan has reached since (spec §8: nothing unreached is reported removed — and no removal is lost either).
import type { CatalogRelation, CatalogSchema, CatalogStructure } from './model.js';

const relKey = (r: { schema: string; name: string }) => `${r.schema}\u0000${r.name}`;

/**
 * `reached` as read by a capped scan, completed with what `previous` knew of the containers it left incomplete.
 * Carried objects keep their earlier completeness, so a later diff compares against the best knowledge there is: an
 * object removed inside the unreached part is reported removed by the first scan that reaches it again.
 */
export function withUnreached(previous: CatalogStructure | null, reached: CatalogStructure): CatalogStructure {
  if (previous === null || reached.truncated_by === null || previous.kind !== reached.kind) return reached;
  if (reached.kind === 'openapi') {
    const seen = new Set(reached.operations.map((o) => `${o.method} ${o.path}`));
    return { ...reached, operations: [...reached.operations, ...previous.operations.filter((o) => !seen.has(`${o.method} ${o.path}`))] };
  }
  const prevSchemas = new Map(previous.schemas.map((s) => [s.name, s]));
  const reachedSchemas = new Map(reached.schemas.map((s) => [s.name, s]));
  const schemas: CatalogSchema[] = reached.schemas.map((s) => (s.complete ? s : { name: s.name, complete: prevSchemas.get(s.name)?.complete ?? false }));
  if (!reached.schemas_complete) for (const s of previous.schemas) if (!reachedSchemas.has(s.name)) schemas.push(s);
  schemas.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));

  const prevRels = new Map(previous.relations.map((r) => [relKey(r), r]));
  const relations: CatalogRelation[] = reached.relations.map((r) => {
    if (r.complete) return r;
    const before = prevRels.get(relKey(r));
    if (before === undefined) return r;
    const have = new Set(r.columns.map((c) => c.name));
    return { ...r, columns: [...r.columns, ...before.columns.filter((c) => !have.has(c.name))], complete: before.complete };
  });
  const have = new Set(reached.relations.map(relKey));
  for (const r of previous.relations) {
    if (have.has(relKey(r))) continue;
    const s = reachedSchemas.get(r.schema);
    // A relation of a schema the scan read whole is gone; one of a schema it did not reach (or read in part) is carried.
    if (s !== undefined ? !s.complete : !reached.schemas_complete) relations.push(r);
  }
  return { ...reached, schemas, schemas_complete: reached.schemas_complete || previous.schemas_complete, relations };
}
