// The whole path on real parts: a directory and an HTTP upstream with generated documents → source sync → a worker process ingests → search_documents and read_document over MCP, with grants, policy redaction and one audit entry per call.
import { createServer, type Server } from 'node:http';
import { writeFile, utimes } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startIngestionWorld, type IngestionWorld } from './support.js';
import { docx, textPdf } from './fixtures.js';
import type { StartedCli } from '../support/cli.js';

type Structured = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const EMAIL = 'erika.mustermann@example.org';
let world: IngestionWorld;
let upstream: Server;
let worker: StartedCli;
const clients: Client[] = [];
const served = new Map<string, { body: Buffer; type: string; etag: string }>();
let plain: { id: number; key: string };
let masked: { id: number; key: string };
let outsider: { id: number; key: string };

async function connect(key: string): Promise<Client> {
  const client = new Client({ name: 'ingestion-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  clients.push(client);
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<{ isError: boolean; s: Structured }> {
  const r = await client.callTool({ name, arguments: args });
  return { isError: r.isError === true, s: (r.structuredContent ?? {}) as Structured };
}

const settledAll = () => world.waitForJobs((jobs) => jobs.length > 0 && jobs.every((j) => j.status === 'completed' || j.status === 'failed'), 90_000, 'jobs settled');

beforeAll(async () => {
  upstream = createServer((req, res) => {
    const hit = served.get(req.url ?? '');
    if (!hit) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': hit.type, etag: hit.etag }).end(hit.body);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  world = await startIngestionWorld({}, { role: 'all' });
  const port = (upstream.address() as { port: number }).port;
  expect((await world.admin('POST', '/api/data-sources', { name: 'Handbook', source_id: 'handbook', source_type: 'files', connection_config: { root: world.root }, create_default_roles: true })).status).toBe(201);
  await world.httpSource('upstream', `http://127.0.0.1:${port}/site/`, { ingestion_index: { path: 'sitemap.xml', format: 'sitemap' } });
  plain = await world.agent('docs-plain', [{ source_id: 'handbook', role_key: 'reader' }, { source_id: 'upstream', role_key: 'reader' }]);
  masked = await world.agent('docs-masked', [{ source_id: 'handbook', role_key: 'reader' }]);
  outsider = await world.agent('docs-outsider', [{ source_id: 'upstream', role_key: 'reader' }]);
  await world.policy({ name: 'no redaction for docs-plain', conditions: { identity_ids: [plain.id] }, actions: { effect: 'allow', pii_mode: 'off' } });
  await world.policy({ name: 'deep redaction for docs-masked', conditions: { identity_ids: [masked.id] }, actions: { effect: 'allow', pii_mode: 'deep' } });
  worker = await world.worker('e2e-worker');
}, 120_000);

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await world?.stop();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

describe('sync → ingest → search and read over MCP', () => {
  it('syncs a directory and an HTTP sitemap, creating jobs only for new, changed and failed assets', async () => {
    await writeFile(path.join(world.root, 'policy.pdf'), await textPdf([['Travel policy'], ['Expenses are filed with the heliotrope form.', `Questions: ${EMAIL}`]]));
    await writeFile(path.join(world.root, 'onboarding.docx'), docx(['Onboarding', 'Badges are collected at the lighthouse desk.']));
    await writeFile(path.join(world.root, 'broken.pdf'), Buffer.from('%PDF-1.4\nnot really'));
    const sitemap = (port: number) =>
      `<?xml version="1.0"?><urlset><url><loc>http://127.0.0.1:${port}/site/faq.html</loc><lastmod>2026-11-01</lastmod></url><url><loc>http://elsewhere.example/x.html</loc></url></urlset>`;
    const port = (upstream.address() as { port: number }).port;
    served.set('/site/sitemap.xml', { body: Buffer.from(sitemap(port)), type: 'application/xml', etag: '"s1"' });
    served.set('/site/faq.html', { body: Buffer.from('<html><body><p>The marmalade rota is on Fridays.</p></body></html>'), type: 'text/html', etag: '"f1"' });

    const first = await world.admin('POST', '/api/data-sources/handbook/sync');
    expect(first.status, first.text).toBe(200);
    expect(first.json).toEqual({ source_id: 'handbook', connector_key: 'files', assets_seen: 3, jobs_created: 3, jobs_requeued: 0 });
    const web = await world.admin('POST', '/api/data-sources/upstream/sync');
    expect(web.json).toEqual({ source_id: 'upstream', connector_key: 'http', assets_seen: 1, jobs_created: 1, jobs_requeued: 0 });
    await settledAll();
    const byPath = new Map((await world.jobs()).map((j) => [j.file_path, j]));
    expect(byPath.get('broken.pdf')!.status).toBe('failed');
    expect(byPath.get('policy.pdf')!.status).toBe('completed');

    // Nothing changed: nothing new, only the failed one requeued.
    const again = await world.admin('POST', '/api/data-sources/handbook/sync');
    expect(again.json).toMatchObject({ assets_seen: 3, jobs_created: 0, jobs_requeued: 1 });
    await settledAll();
    // A changed file (mtime and size) is requeued; a new one created.
    await writeFile(path.join(world.root, 'onboarding.docx'), docx(['Onboarding', 'Badges are now collected at the observatory desk.']));
    await utimes(path.join(world.root, 'onboarding.docx'), new Date(), new Date(Date.now() + 5_000));
    await writeFile(path.join(world.root, 'new.md'), '# New\n\nThe quokka guide.\n');
    const third = await world.admin('POST', '/api/data-sources/handbook/sync');
    expect(third.json).toMatchObject({ assets_seen: 4, jobs_created: 1, jobs_requeued: 2 });
    await settledAll();
    expect((await world.admin('POST', '/api/data-sources/no-such/sync')).status).toBe(404);
  }, 180_000);

  it('search_documents finds pages of granted sources only; read_document redacts per policy; each call one audit entry', async () => {
    const c = await connect(plain.key);
    const found = await call(c, 'search_documents', { query: 'heliotrope' });
    expect(found.isError, JSON.stringify(found.s)).toBe(false);
    expect(found.s.results.map((r: Structured) => [r.source, r.path, r.page])).toEqual([['handbook', 'policy.pdf', 2]]);
    const updated = await call(c, 'search_documents', { query: 'observatory', source: 'handbook' });
    expect(updated.s.results.map((r: Structured) => r.path)).toEqual(['onboarding.docx']);
    expect((await call(c, 'search_documents', { query: 'lighthouse' })).s.results).toEqual([]);
    expect((await call(c, 'search_documents', { query: 'marmalade' })).s.results.map((r: Structured) => r.path)).toEqual(['faq.html']);
    // A query naming no word (stop words, punctuation) is a clear error, never a database error (decision record 0026 §4).
    const noWords = await call(c, 'search_documents', { query: 'the and of' });
    expect([noWords.isError, noWords.s.error]).toEqual([true, 'invalid_request']);
    expect((await call(c, 'search_documents', { query: `'"):*&|!<->(` })).s.error).toBe('invalid_request');

    const shown = await call(c, 'read_document', { source: 'handbook', path: 'policy.pdf', page_from: 2, page_to: 2 });
    expect(shown.isError).toBe(false);
    expect(shown.s).toMatchObject({ source: 'handbook', path: 'policy.pdf', content_type: 'application/pdf', page_count: 2 });
    expect(shown.s.pages[0].text).toContain(EMAIL);

    const m = await connect(masked.key);
    const hidden = await call(m, 'read_document', { source: 'handbook', path: 'policy.pdf' });
    expect(hidden.s.pages.map((p: Structured) => p.page)).toEqual([1, 2]);
    expect(hidden.s.pages[1].text).not.toContain(EMAIL);
    expect(hidden.s.pages[1].text).toContain('heliotrope');
    const snippet = await call(m, 'search_documents', { query: 'questions heliotrope', source: 'handbook' });
    expect(JSON.stringify(snippet.s)).not.toContain(EMAIL);
    expect(snippet.s.results.length).toBe(1);

    // No grant on handbook: refused by the source-role stage as a proxied GET would be, and its pages never show up in a search.
    const o = await connect(outsider.key);
    const refused = await call(o, 'read_document', { source: 'handbook', path: 'policy.pdf' });
    expect(refused.isError).toBe(true);
    expect(refused.s.error).toBe('forbidden');
    expect((await call(o, 'search_documents', { query: 'heliotrope', source: 'handbook' })).s.error).toBe('forbidden');
    expect((await call(o, 'search_documents', { query: 'heliotrope', source: 'no-such-source' })).s.error).toBe('unknown_source');
    expect((await call(o, 'search_documents', { query: 'heliotrope' })).s.results).toEqual([]);
    expect((await call(c, 'read_document', { source: 'handbook', path: 'nope.pdf' })).s.error).toBe('not_found');
    expect((await call(c, 'read_document', { source: 'handbook', path: '../etc/passwd' })).isError).toBe(true);

    await new Promise((r) => setTimeout(r, 300));
    const rows = await world.svc.running.services.db
      .selectFrom('audit_entries' as never)
      .select(['action', 'identity_id', 'decision', 'source_id', 'path', 'redactions'] as never)
      .where('channel' as never, '=', 'mcp' as never)
      .where('action' as never, 'in', ['mcp.search_documents', 'mcp.read_document'] as never)
      .execute() as unknown as Array<{ action: string; identity_id: number; decision: string; source_id: string | null; path: string | null; redactions: number }>;
    expect(rows.length).toBe(15);
    const maskedRead = rows.find((r) => r.identity_id === masked.id && r.action === 'mcp.read_document')!;
    expect(maskedRead).toMatchObject({ decision: 'allow', source_id: 'handbook', path: '/policy.pdf' });
    expect(maskedRead.redactions).toBeGreaterThan(0);
    expect(rows.filter((r) => r.identity_id === outsider.id && r.decision === 'deny').length).toBe(3);
    expect(worker.child.exitCode).toBeNull();
  }, 120_000);
});
