// Captures an HTTP source's structure from the OpenAPI document it names (`openapi_path`): operations, their parameters and the property names of their JSON responses.
import type { CatalogCaps } from './capture-postgres.js';
import type { CatalogOperation, CatalogStructure, CapName } from './model.js';

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
/** How deep response schemas are followed ($ref, arrays, nested objects): enough for real APIs, bounded for hostile ones. */
const MAX_SCHEMA_DEPTH = 6;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Follows a local `$ref` (`#/components/schemas/X`); anything else is returned as is, a foreign ref as `{}`. */
export function resolveRef(doc: Obj, v: unknown): unknown {
  if (!isObj(v) || typeof v.$ref !== 'string') return v;
  const ref = v.$ref;
  if (!ref.startsWith('#/')) return {};
  let cur: unknown = doc;
  for (const part of ref.slice(2).split('/')) {
    const key = part.replaceAll('~1', '/').replaceAll('~0', '~');
    if (!isObj(cur)) return {};
    cur = cur[key];
  }
  return cur;
}

/** Property names of a schema, dotted for nested objects (`address.city`), arrays transparent. */
function properties(doc: Obj, schema: unknown, prefix: string, depth: number, out: Set<string>): void {
  if (depth > MAX_SCHEMA_DEPTH || out.size > 10_000) return;
  const s = resolveRef(doc, schema);
  if (!isObj(s)) return;
  if (s.type === 'array' || s.items !== undefined) properties(doc, s.items, prefix, depth + 1, out);
  for (const combo of ['allOf', 'oneOf', 'anyOf'] as const) {
    const list = s[combo];
    if (Array.isArray(list)) for (const sub of list) properties(doc, sub, prefix, depth + 1, out);
  }
  if (isObj(s.properties)) {
    for (const [name, sub] of Object.entries(s.properties)) {
      const full = prefix === '' ? name : `${prefix}.${name}`;
      out.add(full);
      properties(doc, sub, full, depth + 1, out);
    }
  }
}

function parameterNames(doc: Obj, list: unknown): string[] {
  if (!Array.isArray(list)) return [];
  const names: string[] = [];
  for (const p of list) {
    const r = resolveRef(doc, p);
    if (isObj(r) && typeof r.name === 'string') names.push(`${typeof r.in === 'string' ? r.in : 'query'}:${r.name}`);
  }
  return names;
}

/** The operations of an OpenAPI 3 (or Swagger 2) document; caps bound operations (max_tables) and properties (max_columns_per_table, max_nodes). */
export function captureOpenApi(doc: unknown, caps: CatalogCaps): CatalogStructure {
  if (!isObj(doc) || !isObj(doc.paths)) throw new Error('the document has no paths object');
  const operations: CatalogOperation[] = [];
  let truncated: CapName | null = null;
  let nodes = 0;
  const paths = Object.keys(doc.paths).sort();
  outer: for (const path of paths) {
    const item = resolveRef(doc, (doc.paths as Obj)[path]);
    if (!isObj(item)) continue;
    for (const m of METHODS) {
      const op = item[m];
      if (!isObj(op)) continue;
      if (operations.length >= caps.max_tables) {
        truncated ??= 'max_tables';
        break outer;
      }
      if (nodes + 1 > caps.max_nodes) {
        truncated ??= 'max_nodes';
        break outer;
      }
      const props = new Set<string>();
      const responses = isObj(op.responses) ? op.responses : {};
      for (const [status, resp] of Object.entries(responses)) {
        if (!/^2/.test(status) && status !== 'default') continue;
        const r = resolveRef(doc, resp);
        if (!isObj(r)) continue;
        if (isObj(r.content)) {
          for (const [type, media] of Object.entries(r.content)) if (/json/i.test(type) && isObj(media)) properties(doc, media.schema, '', 0, props);
        } else if (r.schema !== undefined) properties(doc, r.schema, '', 0, props);
      }
      let list = [...props].sort();
      if (list.length > caps.max_columns_per_table) {
        list = list.slice(0, caps.max_columns_per_table);
        truncated ??= 'max_columns_per_table';
      }
      if (nodes + 1 + list.length > caps.max_nodes) {
        list = list.slice(0, Math.max(0, caps.max_nodes - nodes - 1));
        truncated ??= 'max_nodes';
      }
      nodes += 1 + list.length;
      operations.push({ method: m.toUpperCase(), path, parameters: [...parameterNames(doc, item.parameters), ...parameterNames(doc, op.parameters)], response_properties: list });
    }
  }
  return { kind: 'openapi', schemas: [], schemas_complete: true, relations: [], operations, truncated_by: truncated, node_count: nodes };
}
