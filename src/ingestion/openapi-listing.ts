// The OpenAPI-declared listing endpoint of an HTTP source (docs/ingestion.md "Sync"): which GET operation lists the documents, where the list sits in its JSON answer, and which item properties name a document and its version. Pure.
import { resolveRef } from '../catalog/capture-openapi.js';
import { IngestionError } from './errors.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Which properties of a listing item carry what (absent: not listed). */
export interface ListingFields {
  /** The document: a path beneath base_url (`path`) or a URL, absolute or relative to base_url. */
  ref: string;
  refIsPath: boolean;
  etag?: string;
  sha256?: string;
  modified?: string;
  size?: string;
}

export interface OpenApiListing {
  /** The operation's path (`/documents`), placed beneath base_url like every request of the source. */
  path: string;
  /** The property of the answer that holds the list; null when the answer is the list itself. */
  listAt: string | null;
  fields: ListingFields;
}

/** Names of the list property, in order of preference, when the answer is an object with several arrays. */
const LIST_NAMES = ['items', 'documents', 'data', 'results', 'files'];
const REF_NAMES = ['path', 'url', 'href', 'link'];

const unusable = (why: string) => new IngestionError('source_unusable', `ingestion_index: ${why}`);

function successSchema(doc: Obj, op: Obj): unknown {
  const responses = resolveRef(doc, op.responses);
  if (!isObj(responses)) return undefined;
  const ok = resolveRef(doc, responses['200'] ?? responses['2XX'] ?? responses.default);
  if (!isObj(ok)) return undefined;
  // OpenAPI 3: content by media type; Swagger 2: the schema itself.
  if (isObj(ok.content)) {
    const json = Object.entries(ok.content).find(([type]) => /^application\/(.+\+)?json\b/i.test(type));
    return json && isObj(json[1]) ? resolveRef(doc, json[1].schema) : undefined;
  }
  return resolveRef(doc, ok.schema);
}

const isArraySchema = (doc: Obj, s: unknown): boolean => {
  const r = resolveRef(doc, s);
  return isObj(r) && (r.type === 'array' || r.items !== undefined);
};

/**
 * Reads the listing operation `operation` (its operationId, or `GET /path`) from an OpenAPI 3 / Swagger 2 document.
 * Refuses — naming why — an operation that is missing, not a GET, needs path or required query parameters, or
 * whose 200 JSON answer does not say where the list is and which property names a document.
 */
export function openApiListing(doc: unknown, operation: string): OpenApiListing {
  if (!isObj(doc) || !isObj(doc.paths)) throw unusable('the OpenAPI document has no paths object');
  let found: { path: string; item: Obj; op: Obj } | null = null;
  for (const [path, rawItem] of Object.entries(doc.paths)) {
    const item = resolveRef(doc, rawItem);
    if (!isObj(item)) continue;
    for (const [method, op] of Object.entries(item)) {
      if (!isObj(op) || !['get', 'post', 'put', 'patch', 'delete', 'head', 'options'].includes(method)) continue;
      if (op.operationId === operation || `${method.toUpperCase()} ${path}` === operation) {
        if (method !== 'get') throw unusable(`operation ${operation} is ${method.toUpperCase()} ${path}, not a GET`);
        found = { path, item, op };
      }
    }
  }
  if (found === null) throw unusable(`the OpenAPI document declares no operation ${operation}`);
  const { path, item, op } = found;
  if (!path.startsWith('/') || /[{}]/.test(path)) throw unusable(`${path} has path parameters; a listing operation takes none`);
  for (const list of [item.parameters, op.parameters]) {
    if (!Array.isArray(list)) continue;
    for (const p of list.map((x) => resolveRef(doc, x))) {
      if (isObj(p) && p.required === true && p.in !== 'header') throw unusable(`${path} requires the parameter ${String(p.name)}`);
    }
  }

  const schema = successSchema(doc, op);
  if (!isObj(schema)) throw unusable(`GET ${path} declares no JSON answer for 200`);
  let listAt: string | null = null;
  let list: Obj;
  if (isArraySchema(doc, schema)) list = schema;
  else {
    const props = isObj(schema.properties) ? schema.properties : {};
    const arrays = Object.keys(props).filter((name) => isArraySchema(doc, props[name]));
    listAt = LIST_NAMES.find((n) => arrays.includes(n)) ?? (arrays.length === 1 ? arrays[0]! : null);
    if (listAt === null) throw unusable(`the answer of GET ${path} has ${arrays.length === 0 ? 'no array property' : `several array properties (${arrays.join(', ')})`}; cannot tell which lists the documents`);
    list = resolveRef(doc, props[listAt]) as Obj;
  }
  const itemSchema = resolveRef(doc, list.items);
  const itemProps = isObj(itemSchema) && isObj(itemSchema.properties) ? itemSchema.properties : {};
  const prop = (name: string) => resolveRef(doc, itemProps[name]) as Obj | undefined;
  const names = Object.keys(itemProps);
  const ref = REF_NAMES.find((n) => names.includes(n)) ?? names.find((n) => ['uri', 'uri-reference', 'url'].includes(String(prop(n)?.format)));
  if (ref === undefined) throw unusable(`the items of GET ${path} have no path, url or uri-formatted property`);
  const fields: ListingFields = { ref, refIsPath: ref === 'path' };
  const pick = (candidates: string[], format?: string) => candidates.find((n) => names.includes(n)) ?? (format ? names.find((n) => prop(n)?.format === format) : undefined);
  const etag = pick(['etag', 'revision', 'version']);
  const sha256 = pick(['sha256', 'checksum']);
  const modified = pick(['modified', 'last_modified', 'updated_at', 'modified_at'], 'date-time');
  const size = pick(['size', 'byte_size', 'bytes']);
  if (etag) fields.etag = etag;
  if (sha256) fields.sha256 = sha256;
  if (modified) fields.modified = modified;
  if (size) fields.size = size;
  return { path, listAt, fields };
}

/** The items of a listing answer, per the listing's shape. */
export function listingItems(text: string, listAt: string | null): unknown[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new IngestionError('corrupt_document', 'the listing answer is not JSON');
  }
  const items = listAt === null ? doc : isObj(doc) ? doc[listAt] : undefined;
  if (!Array.isArray(items)) throw new IngestionError('corrupt_document', `the listing answer has no array${listAt === null ? '' : ` at ${listAt}`}`);
  return items;
}
