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
export async function walkFiles(source: DataSource, filesRoots: readonly string[]): Promise<Asset[]> {
  const config = filesConfigSchema.parse(source.connection_config);
  const root = await filesRootOf(source, filesRoots);
  const assets: Asset[] = [];
  const walk = async (dir: string, depth: number): Promise<void> => {
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
  const assets: Asset[] = [];
  for (const item of items) {
    if (assets.length >= max) break;
    if (typeof item !== 'object' || item === null) continue;
    const o = item as Record<string, unknown>;
    const ref = typeof o.path === 'string' ? o.path : typeof o.url === 'string' ? o.url : null;
    if (ref === null) continue;
    const rel = typeof o.path === 'string' ? (filePathProblem(o.path) === null ? o.path : null) : relativeTo(base, ref);
    if (rel === null) continue;
    const version =
      typeof o.etag === 'string' ? `etag:${o.etag}` : typeof o.sha256 === 'string' ? `sha256:${o.sha256}` : o.modified !== undefined || o.size !== undefined ? `modified:${String(o.modified)};size:${String(o.size)}` : `listed:${rel}`;
    assets.push({ path: rel, version });
  }
  return assets;
}

export async function listHttpAssets(source: DataSource, deps: FetchDeps, max: number): Promise<Asset[]> {
  const config = httpConfigSchema.parse(source.connection_config);
  if (!config.ingestion_index) throw new IngestionError('source_unusable', 'the source names no ingestion_index in its connection_config');
  const url = httpDocumentUrl(source, config.ingestion_index.path);
  const res = await httpGet(source, url, deps);
  if (res.status !== 200) throw new IngestionError('upstream_status', `the index answered HTTP ${res.status}`);
  const base = new URL(config.base_url);
  const text = res.body.toString('utf8');
  return config.ingestion_index.format === 'sitemap' ? parseSitemap(text, base, max) : parseJsonListing(text, base, max);
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
