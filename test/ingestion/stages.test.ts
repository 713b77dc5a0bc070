// The stages on real files from a directory and a real HTTP upstream: PDF text layer and a scanned page (OCR), DOCX, CSV, HTML, Markdown, JSON; classification; and each bad document failing clearly without harm.
import { createServer, type Server } from 'node:http';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { startIngestionWorld, type IngestionWorld } from './support.js';
import { docx, docxBomb, pdfWithScannedPage } from './fixtures.js';
import { searchPages } from '../../src/store/repos/document-search.js';
import type { StartedCli } from '../support/cli.js';

let world: IngestionWorld;
let upstream: Server;
let worker: StartedCli;
const served = new Map<string, { body: Buffer; type: string }>();

const SECRET_OUTSIDE = 'outside-secret-4f1c9e-never-ingested';

const docs = () =>
  world.svc.running.services.db.selectFrom('ingestion_documents').selectAll().orderBy('id').execute();

async function job(sourceId: string, filePath: string): Promise<number> {
  const a = await world.admin('POST', '/api/jobs', { source_id: sourceId, file_path: filePath });
  expect(a.status, a.text).toBe(201);
  return a.json.id as number;
}

async function settled(ids: number[]) {
  await world.waitForJobs((jobs) => ids.every((id) => ['completed', 'failed'].includes(jobs.find((j) => j.id === id)?.status ?? '')), 90_000, `jobs ${ids.join(',')} settled`);
  return Promise.all(ids.map(async (id) => (await world.admin('GET', `/api/jobs/${id}`)).json));
}

beforeAll(async () => {
  upstream = createServer((req, res) => {
    const hit = served.get(req.url ?? '');
    if (!hit) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': hit.type, etag: `"${hit.body.length}"` }).end(hit.body);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  world = await startIngestionWorld({
    SERVICE_INGESTION__MAX_DOCUMENT_BYTES: String(2 * 1024 * 1024),
    SERVICE_INGESTION__MAX_DECOMPRESSED_BYTES: String(1024 * 1024),
    SERVICE_INGESTION__PRICES__OCR_PER_PAGE: '0.25',
  });
  const port = (upstream.address() as { port: number }).port;
  expect((await world.admin('POST', '/api/data-sources', { name: 'Drive', source_id: 'drive', source_type: 'files', connection_config: { root: world.root } })).status).toBe(201);
  expect((await world.admin('POST', '/api/data-sources', { name: 'Elsewhere', source_id: 'elsewhere', source_type: 'files', connection_config: { root: world.outside } })).status).toBe(201);
  await world.httpSource('upstream', `http://127.0.0.1:${port}/files/`);
  // Not in gateway.egress.allow_private_sources: its loopback upstream is refused like the proxy refuses it.
  await world.httpSource('private', `http://127.0.0.1:${port}/files/`);
  worker = await world.worker('stages-1');
}, 120_000);

afterAll(async () => {
  await world?.stop();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

describe('formats', () => {
  it('extracts a PDF text layer and OCRs its scanned page, counting ocr_pages and ocr_cost', async () => {
    const pdf = await pdfWithScannedPage(
      [
        ['Annual report 2026', 'Revenue grew in every region.'],
        ['Contact: jane.doe@example.com for questions.'],
      ],
      ['SCANNED INVOICE', 'Amount due 4711 kroner'],
    );
    await mkdir(path.join(world.root, 'reports'));
    await writeFile(path.join(world.root, 'reports', 'annual.pdf'), pdf);
    const [j] = await settled([await job('drive', 'reports/annual.pdf')]);
    expect(j, JSON.stringify(j)).toMatchObject({ status: 'completed', stage: 'done', ocr_pages: 1, ocr_cost: 0.25, llm_cost: 0, progress_current: 3, progress_total: 3, error_message: null });
    const doc = (await docs()).find((d) => d.path === 'reports/annual.pdf')!;
    expect(doc).toMatchObject({ content_type: 'application/pdf', page_count: 3, ocr_pages: 1, extract_truncated: false });
    expect(doc.classification).toMatchObject({ personal_data: true, detectors: { email: { count: 1, pages: [2] } } });
    const db = world.svc.running.services.db;
    const pages = await db.selectFrom('ingestion_document_pages').select(['page_no', 'text', 'ocr']).where('document_id', '=', doc.id).orderBy('page_no').execute();
    expect(pages.map((p) => p.ocr)).toEqual([false, false, true]);
    expect(pages[0]!.text).toContain('Revenue grew in every region.');
    expect(pages[2]!.text.toUpperCase()).toContain('INVOICE');
    expect(pages[2]!.text).toContain('4711');
    const hits = await searchPages(db, 'invoice', ['drive'], 10);
    expect(hits.map((h) => [h.path, h.page_no])).toEqual([['reports/annual.pdf', 3]]);
  }, 120_000);

  it('extracts DOCX, CSV, HTML, Markdown and JSON from a directory and over HTTP through the egress rules', async () => {
    const files: Record<string, { body: Buffer; type: string }> = {
      'memo.docx': { body: docx(['Quarterly memo', 'The zebra budget is approved.', 'Tom & Jerry <team>']), type: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document' },
      'table.csv': { body: Buffer.from('name,city\nAda,Lovelace Town\nAlan,Turingham\n'), type: 'text/csv' },
      'page.html': { body: Buffer.from('<!doctype html><html><head><title>Intranet</title><style>.x{color:red}</style><script>var hidden="scriptword";</script></head><body><h1>Welcome &amp; hello</h1><p>The walrus policy lives here.</p></body></html>'), type: 'text/html; charset=utf-8' },
      'readme.md': { body: Buffer.from('# Readme\n\nThe narwhal procedure.\n'), type: 'text/markdown' },
      'data.json': { body: Buffer.from('{"animal": "okapi", "count": 3}'), type: 'application/json' },
    };
    const ids: number[] = [];
    for (const [name, f] of Object.entries(files)) {
      await writeFile(path.join(world.root, name), f.body);
      served.set(`/files/${name}`, f);
      ids.push(await job('drive', name), await job('upstream', name));
    }
    const jobs = await settled(ids);
    for (const j of jobs) expect(j.status, JSON.stringify(j)).toBe('completed');
    const byKey = new Map((await docs()).map((d) => [`${d.source_id}:${d.path}`, d]));
    const expected: Record<string, [string, string, string | null]> = {
      'memo.docx': ['application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'zebra', 'Tom & Jerry <team>'],
      'table.csv': ['text/csv', 'Turingham', null],
      'page.html': ['text/html', 'walrus', 'Welcome & hello'],
      'readme.md': ['text/markdown', 'narwhal', null],
      'data.json': ['application/json', 'okapi', null],
    };
    const db = world.svc.running.services.db;
    for (const [name, [type, word, exact]] of Object.entries(expected)) {
      for (const source of ['drive', 'upstream']) {
        const d = byKey.get(`${source}:${name}`);
        expect(d?.content_type, `${source}:${name}`).toBe(type);
        const hits = await searchPages(db, word, [source], 5);
        expect(hits.map((h) => h.path), `${word} in ${source}`).toContain(name);
        if (exact) expect(hits.find((h) => h.path === name)!.text).toContain(exact);
      }
    }
    // Script and style contents are not text of the page.
    expect(await searchPages(db, 'scriptword', ['drive', 'upstream'], 5)).toEqual([]);
    // The HTTP job recorded the ETag as the asset version.
    expect(byKey.get('upstream:memo.docx')!.asset_version).toMatch(/^etag:/);
  }, 120_000);
});

describe('bad documents fail clearly and harm nothing', () => {
  it('oversize, corrupt PDF, zip bombs, symlink escapes, a root outside files_roots, refused egress', async () => {
    await writeFile(path.join(world.outside, 'secret.txt'), `${SECRET_OUTSIDE}\n`);
    await writeFile(path.join(world.root, 'big.txt'), Buffer.alloc(3 * 1024 * 1024, 0x61));
    await writeFile(path.join(world.root, 'corrupt.pdf'), Buffer.concat([Buffer.from('%PDF-1.7\n1 0 obj\n<< /Type /Catalog'), Buffer.alloc(500, 0x13)]));
    await writeFile(path.join(world.root, 'bomb.docx'), docxBomb(64 * 1024 * 1024));
    await writeFile(path.join(world.root, 'liar.docx'), docxBomb(16 * 1024 * 1024, { lie: true }));
    await writeFile(path.join(world.root, 'binary.bin'), Buffer.from([0x00, 0x01, 0x02, 0xff, 0x00, 0x10]));
    await symlink(path.join(world.outside, 'secret.txt'), path.join(world.root, 'link-out.txt'));
    await symlink(world.outside, path.join(world.root, 'dir-out'));
    await symlink('../outside/secret.txt', path.join(world.root, 'relative-out.txt'));
    served.set('/files/private.txt', { body: Buffer.from('private'), type: 'text/plain' });
    // A good document first: a failing re-ingestion must leave it in place.
    await writeFile(path.join(world.root, 'kept.txt'), 'the platypus paragraph\n');
    const kept = await job('drive', 'kept.txt');
    await settled([kept]);

    const cases: Array<[string, string, RegExp]> = [
      ['drive', 'big.txt', /^document_too_large/],
      ['drive', 'corrupt.pdf', /^corrupt_document/],
      ['drive', 'bomb.docx', /^decompression_bomb/],
      ['drive', 'liar.docx', /^(decompression_bomb|corrupt_document)/],
      ['drive', 'binary.bin', /^unsupported_type/],
      ['drive', 'link-out.txt', /^path_escape/],
      ['drive', 'dir-out/secret.txt', /^path_escape/],
      ['drive', 'relative-out.txt', /^path_escape/],
      ['drive', 'missing.txt', /^not_found/],
      ['drive', 'reports', /^not_a_file/],
      ['elsewhere', 'secret.txt', /^root_not_allowed/],
      ['private', 'private.txt', /^egress_denied/],
    ];
    const ids: number[] = [];
    for (const [source, p] of cases) ids.push(await job(source, p));
    const results = await settled(ids);
    results.forEach((j, i) => {
      const [, p, pattern] = cases[i]!;
      expect(j.status, p).toBe('failed');
      expect(j.error_message, p).toMatch(pattern);
      // Permanent failures are not retried.
      expect(j.retry_count, p).toBe(0);
      expect(j.last_error_at, p).not.toBeNull();
      expect(j.lease_expires_at, p).toBeNull();
    });
    const db = world.svc.running.services.db;
    const stored = await docs();
    for (const [source, p] of cases) expect(stored.find((d) => d.source_id === source && d.path === p), p).toBeUndefined();
    const leaked = await sql<{ n: number }>`select count(*)::int as n from ingestion_document_pages where text like ${'%' + SECRET_OUTSIDE + '%'}`.execute(db);
    expect(leaked.rows[0]!.n).toBe(0);

    // Re-ingesting a good document with broken bytes fails and keeps the stored version.
    await writeFile(path.join(world.root, 'kept.txt'), Buffer.from([0x00, 0xff, 0x00]));
    await world.admin('POST', `/api/jobs/${kept}/cancel`).catch(() => undefined);
    await sql`update ingestion_jobs set status = 'failed' where id = ${kept}`.execute(db);
    expect((await world.admin('POST', `/api/jobs/${kept}/retry`)).status).toBe(200);
    const [again] = await settled([kept]);
    expect(again.error_message).toMatch(/^unsupported_type/);
    expect((await searchPages(db, 'platypus', ['drive'], 5)).map((h) => h.path)).toEqual(['kept.txt']);

    // The worker is unharmed: it still takes new work.
    await writeFile(path.join(world.root, 'after.txt'), 'after the storm\n');
    const [after] = await settled([await job('drive', 'after.txt')]);
    expect(after.status).toBe('completed');
    expect(worker.child.exitCode).toBeNull();
  }, 180_000);
});
