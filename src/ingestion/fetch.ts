// The fetch stage: one document of a source, bounded — from a `files` root with strict confinement, or through the egress rules from an HTTP source (docs/ingestion.md "Fetch").
import { constants } from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { DataSource } from '../store/schema.js';
import type { EgressDispatcher } from '../egress/agent.js';
import { upstreamRequest } from '../egress/request.js';
import { EgressDeniedError, ResponseTooLargeError, UpstreamError } from '../egress/errors.js';
import { httpConfigSchema } from '../connectors/http.js';
import { filesConfigSchema } from '../connectors/files.js';
import { resolveCredential } from '../connectors/credentials.js';
import type { SecretResolver } from '../connectors/types.js';
import { resolveProxyTarget, type PlacedUrl } from '../governance/http-path.js';
import { IngestionError } from './errors.js';
import { filePathProblem } from './paths.js';

export interface FetchedDocument {
  bytes: Buffer;
  /** Content-Type the upstream declared (HTTP), a hint for the sniffer only. */
  declaredType: string | null;
  /** ETag / Last-Modified, or mtime and size: what sync compares to see a change. */
  assetVersion: string;
  sha256: string;
}

export interface FetchDeps {
  egress: EgressDispatcher;
  resolveSecret: SecretResolver;
  filesRoots: readonly string[];
  maxBytes: number;
  timeoutMs: number;
  signal: AbortSignal;
}

/** Fetches `filePath` of `source`; every refusal is an IngestionError with a safe message. */
export async function fetchDocument(source: DataSource, filePath: string, deps: FetchDeps): Promise<FetchedDocument> {
  const problem = filePathProblem(filePath);
  if (problem) throw new IngestionError('path_escape', `file_path ${problem}`);
  if (source.source_type === 'files') return fetchFromFiles(source, filePath, deps);
  if (source.source_type === 'http') return fetchFromHttp(source, filePath, deps);
  throw new IngestionError('source_unusable', `source type ${source.source_type} holds no documents`);
}

// ---------------------------------------------------------------------------------------------
// files

/** The real directory of a `files` source, which must lie in one of the configured roots (ingestion.files_roots). */
export async function filesRootOf(source: DataSource, filesRoots: readonly string[]): Promise<string> {
  const parsed = filesConfigSchema.safeParse(source.connection_config);
  if (!parsed.success) throw new IngestionError('source_unusable', 'connection_config is not a files configuration');
  let root: string;
  try {
    root = await realpath(parsed.data.root);
  } catch {
    throw new IngestionError('source_unusable', 'the source root cannot be read');
  }
  for (const allowed of filesRoots) {
    let real: string;
    try {
      real = await realpath(allowed);
    } catch {
      continue;
    }
    if (root === real || root.startsWith(real + path.sep)) return root;
  }
  throw new IngestionError('root_not_allowed');
}

/**
 * Resolves `rel` under `root` (both real paths) so that nothing — `..`, an absolute symlink, a chain of
 * symlinks — leads outside: the fully resolved path must still be beneath the root.
 */
export async function resolveInsideRoot(root: string, rel: string): Promise<string> {
  const joined = path.resolve(root, rel);
  if (joined !== root && !joined.startsWith(root + path.sep)) throw new IngestionError('path_escape');
  let real: string;
  try {
    real = await realpath(joined);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'ELOOP') throw new IngestionError('path_escape', 'symlink loop');
    throw new IngestionError('not_found');
  }
  if (!real.startsWith(root + path.sep)) throw new IngestionError('path_escape', 'a symlink points outside the root');
  return real;
}

async function fetchFromFiles(source: DataSource, filePath: string, deps: FetchDeps): Promise<FetchedDocument> {
  const root = await filesRootOf(source, deps.filesRoots);
  const real = await resolveInsideRoot(root, filePath);
  let handle;
  try {
    // O_NOFOLLOW: the resolved path is opened as is; a symlink swapped in since resolving is refused, not followed.
    handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as { code?: string }).code === 'ELOOP') throw new IngestionError('path_escape', 'a symlink points outside the root');
    throw new IngestionError('not_found');
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new IngestionError('not_a_file');
    if (st.size > deps.maxBytes) throw new IngestionError('document_too_large', `${st.size} bytes`);
    // Read at most max + 1 bytes: a file that grows while being read is still refused.
    const buf = Buffer.allocUnsafe(Math.min(st.size, deps.maxBytes) + 1);
    let read = 0;
    while (read < buf.length) {
      deps.signal.throwIfAborted();
      const { bytesRead } = await handle.read(buf, read, buf.length - read, read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    if (read > deps.maxBytes) throw new IngestionError('document_too_large');
    const bytes = buf.subarray(0, read);
    return { bytes, declaredType: null, assetVersion: filesAssetVersion(st.size, st.mtimeMs), sha256: sha256(bytes) };
  } finally {
    await handle.close();
  }
}

export function filesAssetVersion(size: number, mtimeMs: number): string {
  return `mtime:${Math.trunc(mtimeMs)};size:${size}`;
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

// ---------------------------------------------------------------------------------------------
// http

/** The upstream URL of `relPath` beneath the source's base URL, with the proxy's own path checks (spec §4 rules 2, 3). */
export function httpDocumentUrl(source: DataSource, relPath: string): PlacedUrl {
  const parsed = httpConfigSchema.safeParse(source.connection_config);
  if (!parsed.success) throw new IngestionError('source_unusable', 'connection_config is not an http configuration');
  const encoded = relPath.split('/').map(encodeURIComponent).join('/');
  const r = resolveProxyTarget({ rawUrl: `/proxy/${source.source_id}/${encoded}`, sourceId: source.source_id, baseUrl: parsed.data.base_url });
  if (!r.ok) throw new IngestionError('path_escape', r.reason);
  return r.url;
}

/** GETs one URL of an HTTP source through its egress dispatcher with the source's own credential. */
export async function httpGet(source: DataSource, url: PlacedUrl, deps: FetchDeps): Promise<{ status: number; headers: Record<string, string | string[]>; body: Buffer }> {
  const config = httpConfigSchema.parse(source.connection_config);
  const cred = resolveCredential(config, { literal: 'token', ref: 'token_ref' }, deps.resolveSecret);
  if (!cred.ok) throw new IngestionError('source_unusable', 'the source credential reference cannot be resolved');
  const headers: Record<string, string> = { accept: '*/*', 'user-agent': 'gatehouse-ingestion' };
  if (cred.value !== null) headers[config.auth_header.toLowerCase()] = config.auth_scheme ? `${config.auth_scheme} ${cred.value}` : cred.value;
  try {
    const res = await upstreamRequest({
      dispatcher: deps.egress,
      url,
      method: 'GET',
      headers,
      sourceId: source.source_id,
      timeoutMs: Math.min(deps.timeoutMs, config.timeout_ms),
      maxResponseBytes: deps.maxBytes,
      signal: deps.signal,
    });
    return { status: res.status, headers: res.headers, body: res.body };
  } catch (err) {
    if (err instanceof ResponseTooLargeError) throw new IngestionError('document_too_large');
    if (err instanceof EgressDeniedError) throw new IngestionError('egress_denied');
    if (err instanceof UpstreamError) throw new IngestionError('upstream_failed', err.reason);
    if (deps.signal.aborted) throw err;
    throw new IngestionError('upstream_failed');
  }
}

function header(headers: Record<string, string | string[]>, name: string): string | null {
  const v = headers[name];
  return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
}

async function fetchFromHttp(source: DataSource, filePath: string, deps: FetchDeps): Promise<FetchedDocument> {
  const res = await httpGet(source, httpDocumentUrl(source, filePath), deps);
  if (res.status === 404 || res.status === 410) throw new IngestionError('not_found');
  if (res.status >= 300) {
    const retryable = res.status >= 500 || res.status === 429 || res.status === 408;
    throw new IngestionError('upstream_status', `HTTP ${res.status}`, { retryable });
  }
  const digest = sha256(res.body);
  const etag = header(res.headers, 'etag');
  const modified = header(res.headers, 'last-modified');
  const assetVersion = etag ? `etag:${etag}` : modified ? `modified:${modified}` : `sha256:${digest}`;
  return { bytes: res.body, declaredType: header(res.headers, 'content-type'), assetVersion, sha256: digest };
}
