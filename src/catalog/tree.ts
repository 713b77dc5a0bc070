// The catalog as the admin API shows it (pure): schemas → relations → columns with confirmed and suggested classifications and open changes, a path filter, and annotation path resolution.
import type { CatalogStructure } from './model.js';
import { parsePath, pathOf } from './model.js';
import { suggestClassification } from './classify.js';

export interface AnnotationLike {
  readonly path: string;
  readonly classification: string;
}

export interface OpenChangeLike {
  readonly path: string;
  readonly change_id: string;
  readonly protected: boolean;
}

const HTTP_PATH = /^(GET|POST|PUT|PATCH|DELETE) (\/\S*)#(.+)$/;

export type ResolvedPath = { readonly ok: true; readonly path: string } | { readonly ok: false; readonly reason: string };

/**
 * The canonical form of an annotation path: `schema.table.column` (segments quoted like PostgreSQL identifiers) for SQL
 * sources, `METHOD /path#property` for OpenAPI-described HTTP sources. With a captured structure the path must name
 * one of its columns (or response properties).
 */
export function resolveAnnotationPath(raw: string, structure: CatalogStructure | null): ResolvedPath {
  const http = HTTP_PATH.exec(raw.trim());
  if (http !== null) {
    const [, method, path, prop] = http as unknown as [string, string, string, string];
    if (structure !== null) {
      const op = structure.operations.find((o) => o.method === method && o.path === path);
      if (op === undefined) return { ok: false, reason: `no operation ${method} ${path} in the captured OpenAPI document` };
      if (!op.response_properties.includes(prop)) return { ok: false, reason: `${method} ${path} has no response property ${prop}` };
    }
    return { ok: true, path: `${method} ${path}#${prop}` };
  }
  const segs = parsePath(raw.trim());
  if (segs === null || segs.length !== 3) return { ok: false, reason: 'must name a column as schema.table.column (quote names with capitals or dots: public."Users".email), or METHOD /path#property' };
  const [schema, table, column] = segs as [string, string, string];
  if (structure !== null && structure.kind === 'sql') {
    const rel = structure.relations.find((r) => r.schema === schema && r.name === table);
    if (rel === undefined) return { ok: false, reason: `no relation ${pathOf(schema, table)} in the catalog` };
    if (!rel.columns.some((c) => c.name === column)) return { ok: false, reason: `${pathOf(schema, table)} has no column ${pathOf(column)} in the catalog` };
  }
  return { ok: true, path: pathOf(schema, table, column) };
}

/** The tree of one snapshot; `q` keeps relations whose path, or one of whose column names, contains it (case-insensitive). */
export function treeOf(structure: CatalogStructure, annotations: readonly AnnotationLike[], open: readonly OpenChangeLike[], q: string | null) {
  const classified = new Map(annotations.map((a) => [a.path, a.classification]));
  const changes = new Map<string, OpenChangeLike>();
  for (const c of open) changes.set(c.path, c);
  const needle = q?.toLowerCase() ?? null;
  const relations = structure.relations
    .map((r) => {
      const relPath = pathOf(r.schema, r.name);
      const columns = r.columns.map((c) => {
        const path = pathOf(r.schema, r.name, c.name);
        // A new, renamed or moved relation's change covers each of its columns.
        const change = changes.get(path) ?? changes.get(relPath);
        return {
          name: c.name,
          path,
          type: c.type,
          nullable: c.nullable,
          has_default: c.has_default,
          classification: classified.get(path) ?? null,
          suggested_classification: suggestClassification(c.name, c.type),
          open_change_id: change?.change_id ?? null,
          protected: change?.protected ?? false,
        };
      });
      return { schema: r.schema, name: r.name, path: relPath, kind: r.kind, partition_of: r.partition_of, primary_key: r.primary_key, foreign_keys: r.foreign_keys, complete: r.complete, columns };
    })
    .filter((r) => needle === null || r.path.toLowerCase().includes(needle) || r.columns.some((c) => c.name.toLowerCase().includes(needle)));
  const operations = structure.operations
    .map((o) => ({
      method: o.method,
      path: o.path,
      parameters: o.parameters,
      response_properties: o.response_properties.map((p) => {
        const full = `${o.method} ${o.path}#${p}`;
        return { name: p, path: full, classification: classified.get(full) ?? null, suggested_classification: suggestClassification(p.slice(p.lastIndexOf('.') + 1)) };
      }),
    }))
    .filter((o) => needle === null || `${o.method} ${o.path}`.toLowerCase().includes(needle) || o.response_properties.some((p) => p.name.toLowerCase().includes(needle)));
  return {
    kind: structure.kind,
    truncated_by: structure.truncated_by,
    node_count: structure.node_count,
    schemas_complete: structure.schemas_complete,
    schemas: structure.schemas.filter((s) => needle === null || s.name.toLowerCase().includes(needle) || relations.some((r) => r.schema === s.name)),
    relations,
    operations,
  };
}
