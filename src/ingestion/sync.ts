// Source sync (spec §2 Source sync result, docs/ingestion.md "Sync"): enumerates a source's documents — a directory walk for `files`, the operator-named index for HTTP — and creates or requeues jobs for new, changed and failed assets.
import { lstat, opendir } from 'node:fs/promises';
import path from 'node:path';
import { httpConfigSchema } from '../connectors/http.js';
import { filesConfigSchema } from '../connectors/files.js';
import type { DataSource, IngestionJob } from '../store/schema.js';
import type { Db } from '../store/repos/util.js';
import { createJob, requeueJob } from '../store/repos/ingestion-jobs.js';
import { IngestionError } from './errors.js';
import { filePathProblem } from './paths.js';
import { filesAssetVersion, filesRootOf, httpDocumentUrl, httpGet, type FetchDeps } from './fetch.js';
import { decodeXmlEntities } from './extract/html.js';
import { listingItems, openApiListing, type ListingFields } from './openapi-listing.js';

export interface Asset {
  path: string;
  /** ETag, mtime and size, or a hash: a different value means the asset changed. */
  version: string;
}

export interface SyncResult {
  source_id: string;
  connector_key: string;
  assets_seen: number;
  jobs_created: number;
  jobs_requeued: number;
}

/** Directories deeper than this are not walked (a sync is bounded work). */
const MAX_DEPTH = 32;

/**
 * Every regular file under the root (symlinks are not followed, so a walk never leaves the root), as relative
 * paths that pass the file_path rule, at most `max_files`, in a stable order.
 */
export async function walkFiles(source: DataSource, filesRoots: readonly string[], signal?: AbortSignal): Promise<Asset[]> {
  // filesRootOf refuses a configuration that is not a files one (source_unusable) before it is parsed here.
  const root = await filesRootOf(source, filesRoots);
  const config = filesConfigSchema.parse(source.connection_config);
  const assets: Asset[] = [];
  const walk = async (dir: string, depth: number): Promise<void> => {
    signal?.throwIfAborted();
    const entries = [];
    for await (const entry of await opendir(dir)) entries.push(entry);
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (assets.length >= config.max_files) return;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (config.recursive && depth < MAX_DEPTH) await walk(full, depth + 1);
        continue;
      }
      if (!entry.isFile()) continue;
      const rel = path.relative(root, full).split(path.sep).join('/');
      if (filePathProblem(rel) !== null) continue;
      const st = await lstat(full);
      assets.push({ path: rel, version: filesAssetVersion(st.size, st.mtimeMs) });
    }
  };
  await walk(root, 0);
  return assets;
}

/** The relative path of an index entry's URL beneath the base URL, or null when it points elsewhere. */
function relativeTo(base: URL, loc: string): string | null {
  let url: URL;
  try {
    url = new URL(loc, base);
  } catch {
    return null;
  }
  const basePath = base.pathname.endsWith('/') ? base.pathname : `${base.pathname}/`;
  if (url.origin !== base.origin || url.search !== '' || url.hash !== '' || !url.pathname.startsWith(basePath)) return null;
  let rel: string;
  try {
    rel = url.pathname.slice(basePath.length).split('/').map(decodeURIComponent).join('/');
  } catch {
    return null;
  }
  return filePathProblem(rel) === null ? rel : null;
}

export function parseSitemap(xml: string, base: URL, max: number): Asset[] {
  const assets: Asset[] = [];
  for (const block of xml.matchAll(/<url>([\s\S]*?)<\/url>/g)) {
    if (assets.length >= max) break;
    const loc = /<loc>\s*([^<]+?)\s*<\/loc>/.exec(block[1]!)?.[1];
    if (!loc) continue;
    const rel = relativeTo(base, decodeXmlEntities(loc));
    if (rel === null) continue;
    const lastmod = /<lastmod>\s*([^<]+?)\s*<\/lastmod>/.exec(block[1]!)?.[1];
    assets.push({ path: rel, version: lastmod ? `lastmod:${lastmod}` : `listed:${rel}` });
  }
  return assets;
}

/** The fields of a plain JSON listing (docs/ingestion.md "Sync"): `path` or `url`, and `etag`, `sha256`, `modified`, `size`. */
const JSON_LISTING_FIELDS = { etag: 'etag', sha256: 'sha256', modified: 'modified', size: 'size' } as const;

/** Listing items as assets: the document reference per `fields`, its version from the first version field present. */
export function listingAssets(items: readonly unknown[], base: URL, max: number, fields: Omit<ListingFields, 'ref' | 'refIsPath'> & { ref?: string; refIsPath?: boolean } = JSON_LISTING_FIELDS): Asset[] {
  const assets: Asset[] = [];
  for (const item of items) {
    if (assets.length >= max) break;
    if (typeof item !== 'object' || item === null) continue;
    const o = item as Record<string, unknown>;
    // A plain listing: `path` (beneath base_url) wins over `url`; a declared listing names its one reference field.
    const refField = fields.ref ?? (typeof o.path === 'string' ? 'path' : 'url');
    const ref = o[refField];
    if (typeof ref !== 'string') continue;
    const rel = (fields.refIsPath ?? refField === 'path') ? (filePathProblem(ref) === null ? ref : null) : relativeTo(base, ref);
    if (rel === null) continue;
    const at = (f: string | undefined) => (f === undefined ? undefined : o[f]);
    const etag = at(fields.etag);
    const sha = at(fields.sha256);
    const modified = at(fields.modified);
    const size = at(fields.size);
    const version =
      typeof etag === 'string' ? `etag:${etag}` : typeof sha === 'string' ? `sha256:${sha}` : modified !== undefined || size !== undefined ? `modified:${String(modified)};size:${String(size)}` : `listed:${rel}`;
    assets.push({ path: rel, version });
  }
  return assets;
}

/** A JSON listing: an array (or `{items: [...]}`) of `{path | url, etag?, sha256?, modified?, size?}`. */
export function parseJsonListing(text: string, base: URL, max: number): Asset[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new IngestionError('corrupt_document', 'the JSON listing is not JSON');
  }
  const items = Array.isArray(doc) ? doc : Array.isArray((doc as { items?: unknown })?.items) ? (doc as { items: unknown[] }).items : null;
  if (!items) throw new IngestionError('corrupt_document', 'the JSON listing is not an array or {items: [...]}');
  return listingAssets(items, base, max);
}

/** GETs `relPath` beneath base_url (egress rules, credential, size bound); anything but 200 is upstream_status. */
async function getIndex(source: DataSource, relPath: string, deps: FetchDeps, what: string): Promise<string> {
  const res = await httpGet(source, httpDocumentUrl(source, relPath), deps);
  if (res.status !== 200) throw new IngestionError('upstream_status', `the ${what} answered HTTP ${res.status}`);
  return res.body.toString('utf8');
}

export async function listHttpAssets(source: DataSource, deps: FetchDeps, max: number): Promise<Asset[]> {
  const config = httpConfigSchema.parse(source.connection_config);
  const index = config.ingestion_index;
  if (!index) throw new IngestionError('source_unusable', 'the source names no ingestion_index in its connection_config');
  const base = new URL(config.base_url);
  if (index.format === 'openapi') {
    // The listing endpoint the source's own OpenAPI document (openapi_path, the one the catalog reads) declares.
    let doc: unknown;
    try {
      doc = JSON.parse(await getIndex(source, config.openapi_path!.replace(/^\//, ''), deps, 'OpenAPI document'));
    } catch (err) {
      if (err instanceof IngestionError) throw err;
      throw new IngestionError('corrupt_document', 'the OpenAPI document is not JSON');
    }
    const listing = openApiListing(doc, index.operation);
    const text = await getIndex(source, listing.path.replace(/^\//, ''), deps, `listing GET ${listing.path}`);
    return listingAssets(listingItems(text, listing.listAt), base, max, listing.fields);
  }
  const text = await getIndex(source, index.path, deps, 'index');
  return index.format === 'sitemap' ? parseSitemap(text, base, max) : parseJsonListing(text, base, max);
}

/** Creates jobs for new assets and requeues changed (completed with another version) and failed ones. */
export async function applySync(db: Db, source: DataSource, assets: readonly Asset[]): Promise<SyncResult> {
  const existing = new Map<string, Pick<IngestionJob, 'id' | 'status' | 'asset_version'>>();
  for (const j of await db.selectFrom('ingestion_jobs').select(['id', 'file_path', 'status', 'asset_version']).where('source_id', '=', source.source_id).execute()) existing.set(j.file_path, j);
  let created = 0;
  let requeued = 0;
  const seen = new Set<string>();
  for (const a of assets) {
    if (seen.has(a.path)) continue;
    seen.add(a.path);
    const job = existing.get(a.path);
    if (!job) {
      await createJob(db, { source_id: source.source_id, file_path: a.path, asset_version: a.version });
      created++;
    } else if (job.status === 'failed' || (job.status === 'completed' && job.asset_version !== a.version)) {
      if (await requeueJob(db, job.id, [job.status], a.version)) requeued++;
    }
  }
  return { source_id: source.source_id, connector_key: source.connector_key ?? source.source_type, assets_seen: seen.size, jobs_created: created, jobs_requeued: requeued };
}
