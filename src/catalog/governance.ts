// The catalog as governance reads it: per source, confirmed classifications by column and by tag, the columns drift protection redacts, and classified OpenAPI response fields; cached and reloaded on `catalog:changed`.
import type { CatalogClassifications, CatalogIdentity, CatalogPort, ClassifiedOperation } from '../pipeline/context.js';
import type { SourceStructure } from '../governance/sql/structure.js';
import { joinName, splitName } from '../governance/sql/names.js';
import { driftProtectionOf, latestStructure, listAnnotations, openProtectedChanges, servedSnapshotId, snapshotIdentities, type IdentityRow } from '../store/repos/catalog.js';
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

/** Schemas a scan never captures: relations there are not "unseen". */
const UNCAPTURED_SCHEMA = /^(pg_catalog|information_schema|pg_toast|pg_temp_\d+|pg_toast_temp_\d+)$/;

/**
 * The served snapshot's identities (pure over the rows): relations by oid with their highest attnum, and classified
 * columns by `oid.attnum`. Undefined when the snapshot predates identities.
 */
export function identityOf(rows: readonly IdentityRow[], annotations: ReadonlyArray<{ path: string; classification: string }>): CatalogIdentity | undefined {
  if (rows.length > 0 && rows.every((r) => r.oid === null)) return undefined;
  const relations = new Map<number, number>();
  const byName = new Map<string, IdentityRow>();
  for (const r of rows) {
    if (r.oid === null) continue;
    relations.set(Number(r.oid), r.max_attnum ?? 0);
    byName.set(`${r.schema}\u0001${r.name}`, r);
  }
  const classified = new Map<string, string[]>();
  for (const a of annotations) {
    const segs = parsePath(a.path);
    if (segs === null || segs.length !== 3) continue;
    const r = byName.get(`${segs[0]}\u0001${segs[1]}`);
    const attnum = r?.columns?.find(([name]) => name === segs[2])?.[1];
    if (r !== undefined && attnum !== undefined) push(classified, `${r.oid}.${attnum}`, a.classification);
  }
  return { relations, classified };
}

/**
 * What the catalog says of the relations a statement reads, compared by identity with the live structure the gateway
 * analysed it against (pure): `unseen` — columns the served snapshot does not hold (a relation created, or a column
 * added, since the last scan: redacted like drift until a scan reports them and they are acknowledged; only with drift
 * protection on), and `tags` — classifications of columns by identity under their live names (a column or table
 * renamed since the scan keeps its classification).
 */
export function liveCatalogFacts(identity: CatalogIdentity, structure: SourceStructure, relationsRead: readonly string[], driftProtection: boolean): { unseen: string[]; tags: Map<string, string[]> } {
  const unseen: string[] = [];
  const tags = new Map<string, string[]>();
  for (const qualified of relationsRead) {
    const parts = splitName(qualified);
    if (parts.length !== 2) continue;
    if (UNCAPTURED_SCHEMA.test(parts[0]!)) continue;
    const rel = structure.lookup(parts[0]!, parts[1]!);
    if (rel === null) {
      // Not even in the live structure yet (created a moment ago): nothing is known of it.
      if (driftProtection) unseen.push(joinName(parts[0]!, parts[1]!, '*'));
      continue;
    }
    if (rel.kind === 'view') continue;
    const known = identity.relations.get(rel.oid);
    if (known === undefined) {
      if (driftProtection) unseen.push(joinName(rel.schema, rel.name, '*'));
      continue;
    }
    for (const c of rel.columns) {
      if (c.attnum > known) {
        if (driftProtection) unseen.push(joinName(rel.schema, rel.name, c.name));
        continue;
      }
      for (const t of identity.classified.get(`${rel.oid}.${c.attnum}`) ?? []) push(tags, joinName(rel.schema, rel.name, c.name), t);
    }
  }
  return { unseen, tags };
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
    const [annotations, protectedChanges, snapshotId, drift] = await Promise.all([listAnnotations(this.db, sourceId), openProtectedChanges(this.db, sourceId), servedSnapshotId(this.db, sourceId), driftProtectionOf(this.db, sourceId)]);
    const built = buildClassifications(annotations, protectedChanges.map((c) => c.path));
    // Only a source with confirmed SQL classifications is compared by identity: there is classified data to copy or
    // rename away from, and an operator who classified it (a source without any keeps the scan-time rules alone).
    if (snapshotId === undefined || built.columnTags.size === 0) return built;
    // Identities are read again only when the served snapshot or the annotations changed.
    const key = `${snapshotId}\u0000${annotations.map((a) => `${a.path}=${a.classification}`).join('\u0000')}`;
    let cached = this.#identities.get(sourceId);
    if (cached?.key !== key) {
      const withColumns = [...new Set(annotations.map((a) => parsePath(a.path)).filter((p): p is string[] => p !== null && p.length === 3).map((p) => `${p[0]}\u0001${p[1]}`))];
      cached = { key, identity: identityOf(await snapshotIdentities(this.db, snapshotId, withColumns), annotations) };
      this.#identities.set(sourceId, cached);
    }
    if (cached.identity === undefined) return built;
    return { ...built, identity: cached.identity, driftProtection: drift };
  }

  readonly #identities = new Map<string, { key: string; identity: CatalogIdentity | undefined }>();

  /** The latest captured structure (describe_source answers from it). */
  structure(sourceId: string) {
    return latestStructure(this.db, sourceId);
  }
}
