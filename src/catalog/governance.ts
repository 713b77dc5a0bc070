// The catalog as governance reads it: per source, confirmed classifications by column and by tag, the columns drift protection redacts, and classified OpenAPI response fields; cached and reloaded on `catalog:changed`.
import type { CatalogClassifications, CatalogPort, ClassifiedOperation } from '../pipeline/context.js';
import { latestStructure, listAnnotations, openProtectedChanges } from '../store/repos/catalog.js';
import type { Db } from '../store/repos/util.js';
import type { CatalogEvents } from './events.js';
import { governedColumn, parsePath } from './model.js';

/** Bound on staleness when a change announcement was missed (pub/sub outage). */
export const CATALOG_VIEW_TTL_MS = 30_000;
const HTTP_ANNOTATION = /^(GET|POST|PUT|PATCH|DELETE) (\/\S*)#(.+)$/;

const EMPTY: CatalogClassifications = Object.freeze({ columnTags: new Map(), byTag: new Map(), protectedColumns: [], operations: [] });

function push(map: Map<string, string[]>, key: string, value: string): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else if (!list.includes(value)) list.push(value);
}

/**
 * `/users/{id}` → a matcher of `/users/42` (one segment per template variable). Case-insensitive: common upstream
 * frameworks route `/USERS/42` to the same handler, and matching more only redacts more.
 */
export function templateMatcher(template: string): (path: string) => boolean {
  const source = template
    .split(/(\{[^}/]+\})/)
    .map((part) => (/^\{[^}/]+\}$/.test(part) ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  const re = new RegExp(`^${source}/?$`, 'i');
  return (path) => re.test(path);
}

/**
 * What the catalog says of one HTTP request (pure): the tags of the operation it calls (method and path template,
 * for `classification_tags` conditions), and the classified field names by tag that `redact_classified` redacts. Field
 * names come from every operation on the path whatever the method: a PUT or a method-override answers the same resource
 * as the GET that was classified. Every reading of the path (`deeperPaths`, nested escapes decoded) is matched.
 */
export function operationClassifications(c: CatalogClassifications, method: string, paths: readonly string[]): { tags: string[]; byTag: Map<string, string[]> } {
  const tags = new Set<string>();
  const byTag = new Map<string, string[]>();
  const upper = method.toUpperCase();
  for (const op of c.operations) {
    if (!paths.some((p) => op.matches(p))) continue;
    for (const [tag, fields] of op.byTag) {
      if (op.method === upper) tags.add(tag);
      for (const f of fields) push(byTag, tag, f);
    }
  }
  return { tags: [...tags], byTag };
}

/** Builds the classifications of one source from its annotations and open protected changes (pure over the rows). */
export function buildClassifications(annotations: ReadonlyArray<{ path: string; classification: string }>, protectedPaths: readonly string[]): CatalogClassifications {
  if (annotations.length === 0 && protectedPaths.length === 0) return EMPTY;
  const columnTags = new Map<string, string[]>();
  const byTag = new Map<string, string[]>();
  const ops = new Map<string, { method: string; path: string; byTag: Map<string, string[]> }>();
  for (const a of annotations) {
    const http = HTTP_ANNOTATION.exec(a.path);
    if (http !== null) {
      const [, method, path, prop] = http as unknown as [string, string, string, string];
      const key = `${method} ${path}`;
      let op = ops.get(key);
      if (op === undefined) ops.set(key, (op = { method, path, byTag: new Map() }));
      // The JSON redactor matches field names, so a nested property is redacted by its own name.
      push(op.byTag, a.classification, prop.slice(prop.lastIndexOf('.') + 1));
      continue;
    }
    const segs = parsePath(a.path);
    if (segs === null || segs.length !== 3) continue;
    const col = governedColumn(segs[0]!, segs[1]!, segs[2]!);
    push(columnTags, col, a.classification);
    push(byTag, a.classification, col);
  }
  const protectedColumns: string[] = [];
  for (const p of protectedPaths) {
    const segs = parsePath(p);
    if (segs !== null && segs.length === 3) protectedColumns.push(governedColumn(segs[0]!, segs[1]!, segs[2]!));
    // A new, renamed or moved relation: every column of it, whatever it is called (a glob of redact_columns).
    else if (segs !== null && segs.length === 2) protectedColumns.push(governedColumn(segs[0]!, segs[1]!, '*'));
  }
  const operations: ClassifiedOperation[] = [...ops.values()].map((o) => ({ method: o.method, matches: templateMatcher(o.path), byTag: o.byTag }));
  return { columnTags, byTag, protectedColumns, operations };
}

/**
 * The per-source cache the pipeline's `catalog` stage reads. An announced change (scan, annotation, acknowledgement,
 * settings) from any process drops the source's entry; entries also expire after CATALOG_VIEW_TTL_MS, and an expired
 * entry is served again only while the control store cannot be read.
 */
export class CatalogGovernance implements CatalogPort {
  readonly #entries = new Map<string, { value: CatalogClassifications; at: number }>();
  readonly #loading = new Map<string, Promise<CatalogClassifications>>();
  #generation = 0;

  constructor(
    private readonly db: Db,
    events: CatalogEvents | null,
    private readonly ttlMs = CATALOG_VIEW_TTL_MS,
    /** Whether announced changes can reach this process now; without it an expired entry is never served again. */
    private readonly changesAudible: () => boolean = () => false,
  ) {
    events?.on('changed', (msg) => this.invalidate(msg.source_id));
    events?.on('scanned', (msg) => this.invalidate(msg.source_id));
  }

  current(sourceId: string): CatalogClassifications | null {
    const e = this.#entries.get(sourceId);
    if (e === undefined || Date.now() - e.at > this.ttlMs) return null;
    return e.value;
  }

  get(sourceId: string): Promise<CatalogClassifications> {
    const hit = this.current(sourceId);
    if (hit !== null) return Promise.resolve(hit);
    let p = this.#loading.get(sourceId);
    if (p === undefined) {
      const generation = this.#generation;
      const previous = this.#entries.get(sourceId);
      p = this.#load(sourceId)
        .then(
          (value) => {
            // A change announced while loading may not be in what was read: keep it for this request only.
            if (generation === this.#generation) this.#entries.set(sourceId, { value, at: Date.now() });
            return value;
          },
          (err: unknown) => {
            // The control store is unreachable: the last value read stays good while no change was announced since
            // and changes can still be heard (as key sessions outlive a database outage but never a revocation or a
            // coordination outage); otherwise the request is refused until the catalog can be read again.
            if (previous !== undefined && this.#entries.get(sourceId) === previous && this.changesAudible()) return previous.value;
            throw err;
          },
        )
        .finally(() => this.#loading.delete(sourceId));
      this.#loading.set(sourceId, p);
    }
    return p;
  }

  invalidate(sourceId: string): void {
    this.#generation += 1;
    this.#entries.delete(sourceId);
    this.#loading.delete(sourceId);
  }

  async #load(sourceId: string): Promise<CatalogClassifications> {
    const [annotations, protectedChanges] = await Promise.all([listAnnotations(this.db, sourceId), openProtectedChanges(this.db, sourceId)]);
    return buildClassifications(annotations, protectedChanges.map((c) => c.path));
  }

  /** The latest captured structure (describe_source answers from it). */
  structure(sourceId: string) {
    return latestStructure(this.db, sourceId);
  }
}
