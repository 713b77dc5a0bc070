// HTTP sync from an OpenAPI-declared listing endpoint, and the document → catalog asset link, on real parts: real upstream HTTP servers, the admin API and a real worker process that scans the source's catalog and ingests its documents through the egress rules.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { startIngestionWorld, type IngestionWorld } from './support.js';
import { ConsoleClient } from '../console/support/pages.js';
import { OWNER_PASSWORD } from '../support/world.js';
import { waitFor } from '../support/wait.js';
import { catalogAssetFor } from '../../src/ingestion/catalog-link.js';
import { openApiListing } from '../../src/ingestion/openapi-listing.js';

let world: IngestionWorld;
let upstream: Server;
/** A second upstream, for a source not allowed to reach private addresses: it must never see a request. */
let forbidden: Server;
const hits: string[] = [];
const forbiddenHits: string[] = [];
let listing: unknown;

const OPENAPI = {
  openapi: '3.0.3',
  info: { title: 'Docs', version: '1' },
  paths: {
    '/documents': {
      get: {
        operationId: 'listDocuments',
        parameters: [{ name: 'page', in: 'query', required: false, schema: { type: 'integer' } }],
        responses: { '200': { description: 'the documents', content: { 'application/json': { schema: { $ref: '#/components/schemas/DocumentList' } } } } },
      },
    },
    '/files/{name}': {
      get: { operationId: 'getFile', parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }], responses: { '200': { description: 'a file', content: { 'text/html': {} } } } },
    },
    '/files/handbook.html': { get: { operationId: 'getHandbook', responses: { '200': { description: 'the handbook', content: { 'text/html': {} } } } } },
    '/search': { get: { operationId: 'search', parameters: [{ name: 'q', in: 'query', required: true }], responses: { '200': { description: 'hits' } } } },
    '/status': { get: { operationId: 'status', responses: { '200': { description: 'x' } } } },
    '/upload': { post: { operationId: 'upload', responses: { '201': { description: 'ok' } } } },
  },
  components: {
    schemas: {
      DocumentList: {
        type: 'object',
        properties: { next: { type: 'string', nullable: true }, total: { type: 'integer' }, data: { type: 'array', items: { $ref: '#/components/schemas/DocumentRef' } } },
      },
      DocumentRef: { type: 'object', properties: { href: { type: 'string', format: 'uri-reference' }, revision: { type: 'string' }, checksum: { type: 'string' }, updated_at: { type: 'string', format: 'date-time' } } },
    },
  },
};

const PAGES: Record<string, { type: string; body: string }> = {
  '/api/files/faq.html': { type: 'text/html', body: '<html><body><p>The pelican roster is kept in the boathouse.</p></body></html>' },
  '/api/files/handbook.html': { type: 'text/html', body: '<html><body><h1>Handbook</h1><p>Leave is booked with the albatross form.</p></body></html>' },
};

function handler(record: string[]) {
  return (req: IncomingMessage, res: ServerResponse) => {
    // The sync's own requests carry the ingestion user agent; the worker's catalog scans read openapi.json too.
    if (req.headers['user-agent'] === 'gatehouse-ingestion') record.push(req.url ?? '');
    else if (record === forbiddenHits) record.push(`other ${req.url ?? ''}`);
    if (req.url === '/api/openapi.json') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(OPENAPI));
    if (req.url === '/api/documents') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(listing));
    const page = PAGES[req.url ?? ''];
    if (page) return void res.writeHead(200, { 'content-type': page.type }).end(page.body);
    res.writeHead(404).end();
  };
}

const portOf = (s: Server) => (s.address() as { port: number }).port;

beforeAll(async () => {
  upstream = createServer(handler(hits));
  forbidden = createServer(handler(forbiddenHits));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => forbidden.listen(0, '127.0.0.1', r));
  listing = {
    next: null,
    total: 4,
    data: [
      { href: 'files/faq.html', checksum: 'c-faq' },
      { href: `http://127.0.0.1:${portOf(upstream)}/api/files/handbook.html`, revision: 'r1' },
      // Outside base_url: ignored, never fetched.
      { href: 'http://elsewhere.example/api/files/x.html', revision: 'r1' },
      { href: '../secret.html' },
    ],
  };
  world = await startIngestionWorld();
  await world.httpSource('upstream', `http://127.0.0.1:${portOf(upstream)}/api/`, { openapi_path: '/openapi.json', ingestion_index: { format: 'openapi', operation: 'listDocuments' } });
  await world.httpSource('walled', `http://127.0.0.1:${portOf(forbidden)}/api/`, { openapi_path: '/openapi.json', ingestion_index: { format: 'openapi', operation: 'GET /documents' } });
}, 120_000);

afterAll(async () => {
  await world?.stop();
  for (const s of [upstream, forbidden]) {
    s?.closeAllConnections();
    await new Promise((r) => s?.close(r));
  }
});

describe('OpenAPI listing (pure)', () => {
  it('reads the declared operation, where its list is and which fields name a document and its version', () => {
    expect(openApiListing(OPENAPI, 'listDocuments')).toEqual({ path: '/documents', listAt: 'data', fields: { ref: 'href', refIsPath: false, etag: 'revision', sha256: 'checksum', modified: 'updated_at' } });
    expect(openApiListing(OPENAPI, 'GET /documents').path).toBe('/documents');
    const refusals: Array<[string, RegExp]> = [
      ['nope', /declares no operation nope/],
      ['getFile', /path parameters/],
      ['search', /requires the parameter q/],
      ['upload', /not a GET/],
      ['status', /declares no JSON answer/],
    ];
    for (const [op, why] of refusals) expect(() => openApiListing(OPENAPI, op), op).toThrow(why);
    expect(() => openApiListing({ paths: { '/l': { get: { responses: { '200': { content: { 'application/json': { schema: { type: 'object', properties: { a: { type: 'array' }, b: { type: 'array' } } } } } } } } } } }, 'GET /l')).toThrow(/several array properties/);
    expect(() => openApiListing({ paths: { '/l': { get: { responses: { '200': { content: { 'application/json': { schema: { type: 'array', items: { properties: { name: { type: 'string' } } } } } } } } } } } }, 'GET /l')).toThrow(/no path, url/);
    expect(() => openApiListing('not a document', 'x')).toThrow(/no paths object/);
  });

  it('links a document path to the most specific GET operation of an OpenAPI structure, and to nothing otherwise', () => {
    const ops = (paths: string[]) => ({ kind: 'openapi' as const, operations: paths.map((p) => ({ method: 'GET', path: p, parameters: [], response_properties: [] })) });
    const s = ops(['/files/{name}', '/files/handbook.html', '/{any}/{name}']);
    expect(catalogAssetFor(s, 'files/handbook.html')).toBe('GET /files/handbook.html');
    expect(catalogAssetFor(s, 'files/faq.html')).toBe('GET /files/{name}');
    expect(catalogAssetFor(s, 'other/faq.html')).toBe('GET /{any}/{name}');
    // A template variable is one segment: no operation serves a deeper path.
    expect(catalogAssetFor(s, 'files/a/b.html')).toBeNull();
    expect(catalogAssetFor({ kind: 'openapi', operations: [{ method: 'POST', path: '/files/{name}', parameters: [], response_properties: [] }] }, 'files/x')).toBeNull();
    expect(catalogAssetFor({ kind: 'sql', operations: [] }, 'files/x')).toBeNull();
    expect(catalogAssetFor(null, 'files/x')).toBeNull();
  });
});

describe('sync from an OpenAPI-declared listing → a worker ingests → documents carry their catalog asset', () => {
  it('refuses an openapi index without openapi_path, and an operation the document does not declare as a listing', async () => {
    const missing = await world.admin('POST', '/api/data-sources', {
      name: 'no doc',
      source_id: 'nodoc',
      source_type: 'http',
      connection_config: { base_url: `http://127.0.0.1:${portOf(upstream)}/api/`, ingestion_index: { format: 'openapi', operation: 'listDocuments' } },
    });
    expect(missing.status).toBe(422);
    expect(JSON.stringify(missing.json.detail)).toContain('openapi_path');
    const noOperation = await world.admin('POST', '/api/data-sources', {
      name: 'no op',
      source_id: 'noop',
      source_type: 'http',
      connection_config: { base_url: `http://127.0.0.1:${portOf(upstream)}/api/`, ingestion_index: { format: 'openapi' } },
    });
    expect(noOperation.status).toBe(422);
    const config = (op: string) => ({ connection_config: { base_url: `http://127.0.0.1:${portOf(upstream)}/api/`, openapi_path: '/openapi.json', ingestion_index: { format: 'openapi', operation: op } } });
    for (const [op, why] of [['getFile', 'path parameters'], ['search', 'requires the parameter q'], ['nope', 'declares no operation']] as const) {
      expect((await world.admin('PATCH', '/api/data-sources/upstream', config(op))).status).toBe(200);
      const refused = await world.admin('POST', '/api/data-sources/upstream/sync');
      expect(refused.status, op).toBe(409);
      expect(refused.text).toContain(why);
    }
    expect((await world.admin('PATCH', '/api/data-sources/upstream', config('listDocuments'))).status).toBe(200);
    expect(await world.jobs()).toEqual([]);
  });

  it('a source outside gateway.egress.allow_private_sources is refused before any byte reaches its upstream', async () => {
    const r = await world.admin('POST', '/api/data-sources/walled/sync');
    expect(r.status).toBe(403);
    expect(r.text).not.toContain('127.0.0.1');
    expect(forbiddenHits).toEqual([]);
  });

  it('lists through the declared endpoint, ingests on a worker, and links each document to its catalog operation', async () => {
    const w = await world.worker('openapi-worker');
    const db = world.svc.running.services.db;
    // The worker's catalog scan (on save) captures the OpenAPI operations the documents are linked to.
    await waitFor(
      async () => (await sql<{ n: number }>`select count(*)::int as n from catalog_snapshots where source_id = 'upstream' and status = 'ok'`.execute(db)).rows[0]!.n > 0,
      60_000,
      'catalog snapshot of upstream',
      100,
    );
    hits.length = 0;
    const first = await world.admin('POST', '/api/data-sources/upstream/sync');
    expect(first.status, first.text).toBe(200);
    expect(first.json).toEqual({ source_id: 'upstream', connector_key: 'http', assets_seen: 2, jobs_created: 2, jobs_requeued: 0 });
    // The document, then the declared listing endpoint beneath base_url; nothing outside it. The worker may already
    // be fetching the listed documents (jobs exist once the sync answers), so only those may follow the two.
    expect(hits.slice(0, 2)).toEqual(['/api/openapi.json', '/api/documents']);
    for (const later of hits.slice(2)) expect(['/api/files/faq.html', '/api/files/handbook.html']).toContain(later);
    await world.waitForJobs((jobs) => jobs.filter((j) => j.status === 'completed').length === 2, 90_000, 'both documents ingested');
    // Every request the sync and its jobs made stayed beneath base_url: the two listed files, each once.
    expect(hits.slice(2).sort()).toEqual(['/api/files/faq.html', '/api/files/handbook.html']);

    const docs = await world.admin('GET', '/api/data-sources/upstream/documents');
    expect(docs.status, docs.text).toBe(200);
    const byPath = Object.fromEntries((docs.json.items as Array<{ path: string; catalog_asset_id: string | null }>).map((d) => [d.path, d.catalog_asset_id]));
    expect(byPath).toEqual({ 'files/faq.html': 'GET /files/{name}', 'files/handbook.html': 'GET /files/handbook.html' });
    expect(docs.json.next_cursor).toBeNull();
    const one = await world.admin('GET', '/api/data-sources/upstream/document?path=files%2Ffaq.html');
    expect(one.json).toMatchObject({ source_id: 'upstream', path: 'files/faq.html', catalog_asset_id: 'GET /files/{name}', content_type: 'text/html' });
    expect(JSON.stringify(one.json)).not.toContain('pelican');
    expect((await world.admin('GET', '/api/data-sources/upstream/document?path=..%2Fx')).status).toBe(422);
    expect((await world.admin('GET', '/api/data-sources/upstream/document?path=nope.html')).status).toBe(404);
    expect((await world.admin('GET', '/api/data-sources/nosuch/documents')).status).toBe(404);
    const paged = await world.admin('GET', '/api/data-sources/upstream/documents?limit=1');
    expect(paged.json.items).toHaveLength(1);
    const rest = await world.admin('GET', `/api/data-sources/upstream/documents?limit=1&cursor=${paged.json.next_cursor}`);
    expect([paged.json.items[0].path, rest.json.items[0].path].sort()).toEqual(['files/faq.html', 'files/handbook.html']);
    expect((await world.admin('GET', '/api/data-sources/upstream/documents?cursor=forged')).status).toBe(422);

    const owner = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
    const page = await owner.get('/dashboard/data-sources/upstream/documents');
    expect(page.status).toBe(200);
    expect(page.text).toContain('Catalog asset');
    expect(page.text).toContain('GET /files/{name}');

    // Same listing again: nothing new; a changed revision requeues that document only.
    expect((await world.admin('POST', '/api/data-sources/upstream/sync')).json).toMatchObject({ assets_seen: 2, jobs_created: 0, jobs_requeued: 0 });
    (listing as { data: Array<{ revision?: string }> }).data[1]!.revision = 'r2';
    expect((await world.admin('POST', '/api/data-sources/upstream/sync')).json).toMatchObject({ assets_seen: 2, jobs_created: 0, jobs_requeued: 1 });
    await world.waitForJobs((jobs) => jobs.filter((j) => j.status === 'completed').length === 2, 90_000, 'requeued document ingested');
    // The worker's catalog scan of the walled source went through the same egress rules: refused, nothing sent.
    expect(forbiddenHits).toEqual([]);
    await w.stop('SIGTERM');
  }, 180_000);
});
