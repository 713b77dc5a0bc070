// Ingestion benchmark (`npm run bench:ingest`): 1,000 ten-page text PDFs ingested by one and by two real worker processes against pdftotext extracting the same files in one process (goal ≥ 0.5×), worker RSS (goal < 300 MB), and search_documents p95 over 100k indexed pages through MCP (goal ≤ 50 ms; BENCH_INGEST_SEARCH_ONLY=1 runs this part alone, after the same store history).
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startIngestionWorld, type IngestionWorld } from '../test/ingestion/support.js';
import { quantile } from './stats.js';
import { SEARCH_CANDIDATES, searchPages, searchStatement } from '../src/store/repos/document-search.js';
import { saveDocument } from '../src/store/repos/documents.js';
import { CLOCK_TICKS, procTicks } from './proc.js';
import type { Db } from '../src/store/repos/util.js';

const run = promisify(execFile);
const DOCS = Number(process.env.BENCH_INGEST_DOCS ?? 1_000);
const PAGES = 10;
const SEARCH_PAGES = Number(process.env.BENCH_INGEST_SEARCH_PAGES ?? 100_000);
const SEARCHES = Number(process.env.BENCH_INGEST_SEARCHES ?? 300);
const VOCAB = 50_000;
/** Only the search part: no PDFs, no ingestion runs; the pages are filled directly (bench/README.md). */
const SEARCH_ONLY = process.env.BENCH_INGEST_SEARCH_ONLY === '1';

/** A deterministic word: `w` + base-36 of a pseudo-random index (so pages differ and terms are selective). */
function word(seed: number): string {
  return `w${((seed * 2654435761) % VOCAB >>> 0).toString(36)}`;
}

/** Line `line` of page `p` of bench document `doc` (0-based), as drawn in its PDF. */
function pdfLine(doc: number, p: number, line: number): string {
  const words = Array.from({ length: 10 }, (_, i) => word(doc * 10_007 + p * 409 + line * 13 + i));
  return `Line ${line + 1} of page ${p + 1}: ${words.join(' ')}`;
}

async function makePdf(doc: number): Promise<Uint8Array> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  for (let p = 0; p < PAGES; p++) {
    const page = pdf.addPage([595, 842]);
    for (let line = 0; line < 40; line++) page.drawText(pdfLine(doc, p, line), { x: 40, y: 800 - line * 19, size: 10, font });
  }
  return pdf.save();
}

/** The pages of bench document `doc` as a worker stores them. */
function pdfPages(doc: number): Array<{ page_no: number; text: string; ocr: boolean }> {
  return Array.from({ length: PAGES }, (_, p) => ({ page_no: p + 1, text: Array.from({ length: 40 }, (_, line) => pdfLine(doc, p, line)).join('\n'), ocr: false }));
}

/** One stored document of source `sourceId`, as a worker writes it (one transaction: the document and its pages). */
function saveBenchDocument(db: Db, sourceId: string, docPath: string, pages: Array<{ page_no: number; text: string; ocr: boolean }>) {
  return saveDocument(db, {
    source_id: sourceId, path: docPath, job_id: null, catalog_asset_id: null, content_type: 'application/pdf', byte_size: 0, sha256: docPath,
    asset_version: null, page_count: pages.length, ocr_pages: 0, classification: {}, extract_chars: 0, extract_truncated: false, notes: [],
  }, pages);
}

/**
 * Without the ingestion runs (BENCH_INGEST_SEARCH_ONLY), the store history they leave: the documents' pages written,
 * all deleted, and written again, a document per transaction. Deleted rows empty the first pages of the index's
 * posting trees, which is what made 0019's search slow after a full run and not after a fresh fill (decision record
 * 0026 §2); a search-only run must see the same layout.
 */
async function replayIngestion(db: Db): Promise<void> {
  const t0 = performance.now();
  for (let round = 0; round < 2; round++) {
    await sql`delete from ingestion_documents where source_id = 'bench'`.execute(db);
    for (let d = 0; d < DOCS; d++) await saveBenchDocument(db, 'bench', `bench/doc-${d}.pdf`, pdfPages(d));
  }
  console.log(`replayed two ingestions of ${DOCS} documents in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
}

/** VmRSS or VmHWM (the kernel's own peak) of a process, in MB; 0 once it is gone. */
function procMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** CPU seconds (user + system) a process has used, from /proc (far less noisy than throughput on a shared machine). */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

// Workers run the built CLI (`node dist/main.js start --role worker`, what a deployment runs): tsx's in-memory
// transform is not in the figure. BENCH_INGEST_TSX=1 runs them through tsx instead, for comparison.
const BUILT = process.env.BENCH_INGEST_TSX !== '1';

interface IngestRun {
  docsPerSecond: number;
  /** Highest VmRSS sampled every 100 ms, and the kernel's VmHWM at the end, over the workers. */
  maxRssMb: number;
  peakMb: number;
  /** Worker CPU seconds per document (all workers together). */
  cpuMsPerDoc: number;
  /** PostgreSQL CPU per document: every backend of the database (the workers' job queries, the pages, their search keys). */
  pgMsPerDoc: number;
}

async function ingestWith(world: IngestionWorld, workers: number): Promise<IngestRun> {
  const db = world.svc.running.services.db;
  await sql`delete from ingestion_documents`.execute(db);
  await sql`update ingestion_jobs set status = 'cancelled'`.execute(db);
  const procs = await Promise.all(Array.from({ length: workers }, (_, i) => world.worker(`bench-${workers}-${i}`, { SERVICE_OBSERVABILITY__LOG_LEVEL: 'info' }, { built: BUILT })));
  let maxRss = 0;
  const sampler = setInterval(() => {
    for (const p of procs) maxRss = Math.max(maxRss, procMb(p.child.pid!, 'VmRSS'));
  }, 100);
  const cpu0 = procs.reduce((sum, p) => sum + cpuSeconds(p.child.pid!), 0);
  const pg0 = await backendTicks(db);
  const started = performance.now();
  await sql`update ingestion_jobs set status = 'pending', retry_count = 0, run_after = null, worker_id = null, completed_at = null`.execute(db);
  for (;;) {
    const r = await sql<{ done: number; failed: number }>`select count(*) filter (where status = 'completed')::int as done, count(*) filter (where status = 'failed')::int as failed from ingestion_jobs`.execute(db);
    const { done, failed } = r.rows[0]!;
    if (failed > 0) throw new Error(`${failed} jobs failed`);
    if (done === DOCS) break;
    await new Promise((res) => setTimeout(res, 50));
  }
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  const peak = Math.max(...procs.map((p) => procMb(p.child.pid!, 'VmHWM')));
  const cpu = procs.reduce((sum, p) => sum + cpuSeconds(p.child.pid!), 0) - cpu0;
  const pgTicks = (await backendTicks(db)) - pg0;
  await Promise.all(procs.map((p) => p.stop('SIGTERM')));
  return { docsPerSecond: DOCS / seconds, maxRssMb: maxRss, peakMb: peak, cpuMsPerDoc: (cpu * 1000) / DOCS, pgMsPerDoc: (pgTicks * 1000) / CLOCK_TICKS / DOCS };
}

async function main(): Promise<void> {
  const world = await startIngestionWorld({ SERVICE_INGESTION__POLL_INTERVAL_MS: '100' }, { role: 'all' });
  try {
    expectOk(await world.admin('POST', '/api/data-sources', { name: 'Bench', source_id: 'bench', source_type: 'files', connection_config: { root: world.root }, create_default_roles: true }));
    const lines: Array<() => void> = [];
    if (!SEARCH_ONLY) lines.push(await ingestBench(world));
    lines.push(await searchBench(world));
    console.log('');
    for (const l of lines) l();
  } finally {
    await world.stop();
  }
}

const line = (name: string, value: string, goal: string, pass: boolean) => console.log(`${name.padEnd(44)} ${value.padEnd(22)} goal ${goal.padEnd(12)} ${pass ? 'PASS' : 'FAIL'}`);
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

async function ingestBench(world: IngestionWorld): Promise<() => void> {
  const dir = path.join(world.root, 'bench');
  await mkdir(dir);
  const t0 = performance.now();
  for (let i = 0; i < DOCS; i++) await writeFile(path.join(dir, `doc-${i}.pdf`), await makePdf(i));
  console.log(`generated ${DOCS} PDFs of ${PAGES} pages in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  // Baseline: pdftotext over the same files, one after another in one process.
  const b0 = performance.now();
  for (let i = 0; i < DOCS; i++) await run('pdftotext', ['-q', path.join(dir, `doc-${i}.pdf`), '-']);
  const baseline = DOCS / ((performance.now() - b0) / 1000);

  const sync = expectOk(await world.admin('POST', '/api/data-sources/bench/sync'));
  if (sync.json.jobs_created !== DOCS) throw new Error(`sync created ${sync.json.jobs_created} jobs`);

  const one = await ingestWith(world, 1);
  console.log(`pdftotext ${baseline.toFixed(1)} docs/s; gatehouse 1 worker ${one.docsPerSecond.toFixed(1)} docs/s, max RSS ${one.maxRssMb.toFixed(0)} MB (peak ${one.peakMb.toFixed(0)} MB), ${one.cpuMsPerDoc.toFixed(1)} ms CPU/doc, PostgreSQL ${one.pgMsPerDoc.toFixed(1)} ms CPU/doc`);
  const two = await ingestWith(world, 2);
  console.log(`gatehouse 2 workers ${two.docsPerSecond.toFixed(1)} docs/s, max RSS per worker ${two.maxRssMb.toFixed(0)} MB (peak ${two.peakMb.toFixed(0)} MB)`);
  return () => {
    console.log(`pdftotext, one process:   ${baseline.toFixed(1)} docs/s`);
    console.log(`gatehouse, 1 worker:      ${one.docsPerSecond.toFixed(1)} docs/s (max RSS ${one.maxRssMb.toFixed(0)} MB, VmHWM ${one.peakMb.toFixed(0)} MB, ${one.cpuMsPerDoc.toFixed(1)} ms CPU/doc, PostgreSQL ${one.pgMsPerDoc.toFixed(1)} ms CPU/doc; ${BUILT ? 'built' : 'tsx'})`);
    console.log(`gatehouse, 2 workers:     ${two.docsPerSecond.toFixed(1)} docs/s (max RSS per worker ${two.maxRssMb.toFixed(0)} MB, VmHWM ${two.peakMb.toFixed(0)} MB, PostgreSQL ${two.pgMsPerDoc.toFixed(1)} ms CPU/doc)`);
    line('1 worker ÷ pdftotext', `${(one.docsPerSecond / baseline).toFixed(2)}×`, '≥ 0.5×', one.docsPerSecond / baseline >= 0.5);
    line('2 workers ÷ pdftotext', `${(two.docsPerSecond / baseline).toFixed(2)}×`, '≥ 0.5×', two.docsPerSecond / baseline >= 0.5);
    const rss = Math.max(one.maxRssMb, two.maxRssMb, one.peakMb, two.peakMb);
    line(`worker RSS (peak, ${BUILT ? 'built' : 'tsx'})`, `${rss.toFixed(0)} MB`, '< 300 MB', rss < 300);
  };
}

/** The word of Zipf rank r (1 = the most frequent) in the synthetic pages. */
const zipfWord = (r: number) => `z${r.toString(16)}`;

/**
 * Search queries of every kind a reader types, by how many pages their words hit in a Zipf vocabulary: a very common
 * word (on nearly every page), common, middling and rare words, two-word ANDs, a phrase, an OR and an exclusion.
 */
function searchQuery(i: number): { kind: string; query: string } {
  const n = (k: number) => ((i * 2654435761) >>> 0) % k;
  const kinds: Array<[string, () => string]> = [
    ['very common', () => zipfWord(1 + n(5))],
    ['common', () => zipfWord(20 + n(80))],
    ['middling', () => zipfWord(300 + n(2_000))],
    ['rare', () => zipfWord(5_000 + n(40_000))],
    ['common + rare', () => `${zipfWord(1 + n(50))} ${zipfWord(3_000 + n(30_000))}`],
    ['common + common', () => `${zipfWord(1 + n(20))} ${zipfWord(21 + n(200))}`],
    ['phrase', () => `"${zipfWord(1 + n(10))} ${zipfWord(1 + n(7))}"`],
    ['or', () => `${zipfWord(500 + n(5_000))} or ${zipfWord(500 + n(7_000))}`],
    ['exclusion', () => `${zipfWord(30 + n(300))} -${zipfWord(1 + n(10))}`],
  ];
  const [kind, make] = kinds[i % kinds.length]!;
  return { kind, query: make() };
}

/** CPU ticks of every PostgreSQL backend connected to this database (the gateway's pool included). */
async function backendTicks(db: Db): Promise<number> {
  const r = await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database()`.execute(db);
  return r.rows.reduce((sum, row) => sum + procTicks(row.pid), 0);
}

async function searchBench(world: IngestionWorld): Promise<() => void> {
  // Fill the index to SEARCH_PAGES pages of Zipf-distributed words (rank r drawn with P ∝ 1/r over VOCAB words,
  // 300 words a page); every tenth document belongs to a source the bench agent has no grant on.
  const db = world.svc.running.services.db;
  if (SEARCH_ONLY) await replayIngestion(db);
  expectOk(await world.admin('POST', '/api/data-sources', { name: 'Bench other', source_id: 'bench-other', source_type: 'files', connection_config: { root: world.root }, create_default_roles: true }));
  const have = Number((await sql<{ n: number }>`select count(*)::int as n from ingestion_document_pages`.execute(db)).rows[0]!.n);
  const extraDocs = Math.ceil(Math.max(0, SEARCH_PAGES - have) / PAGES);
  const f0 = performance.now();
  await sql`insert into ingestion_documents (source_id, path, content_type, byte_size, sha256, page_count)
    select case when g % 10 = 0 then 'bench-other' else 'bench' end, 'synthetic/' || g || '.pdf', 'application/pdf', 0, md5(g::text), ${PAGES}
    from generate_series(1, ${extraDocs}) g`.execute(db);
  const ids = (await sql<{ id: number }>`select id from ingestion_documents where path like 'synthetic/%' order by id`.execute(db)).rows.map((r) => r.id);
  // In batches: one statement per 200 documents stays well inside the statement timeout on a busy machine.
  for (let i = 0; i < ids.length; i += 200) {
    const batch = ids.slice(i, i + 200);
    await sql`insert into ingestion_document_pages (document_id, page_no, text)
      select d, p, (select string_agg('z' || to_hex(floor(exp(random() * ln(${VOCAB})))::int), ' ') from generate_series(1, 300) k where d > 0 and p > 0)
      from unnest(${sql.val(batch)}::bigint[]) d, generate_series(1, ${PAGES}) p`.execute(db);
  }
  await sql`vacuum analyze ingestion_document_pages`.execute(db);
  await sql`vacuum analyze ingestion_page_keys`.execute(db);
  await sql`analyze ingestion_documents`.execute(db);
  const pages = Number((await sql<{ n: number }>`select count(*)::int as n from ingestion_document_pages`.execute(db)).rows[0]!.n);
  console.log(`filled to ${pages} pages in ${((performance.now() - f0) / 1000).toFixed(0)} s (load average ${loadavg()})`);
  const sizes = await sql<{ heap: string; index: string; total: string }>`
    select pg_size_pretty(pg_relation_size('ingestion_page_keys')) as heap, pg_size_pretty(pg_indexes_size('ingestion_page_keys')) as index,
      pg_size_pretty(pg_total_relation_size('ingestion_page_keys')) as total`.execute(db);
  console.log(`search keys: heap ${sizes.rows[0]!.heap}, indexes ${sizes.rows[0]!.index}, total with TOAST ${sizes.rows[0]!.total}`);

  const agent = await world.agent('bench-reader', [{ source_id: 'bench', role_key: 'reader' }]);
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.key}` } } }));
  const load0 = loadavg();
  const times: number[] = [];
  const byKind = new Map<string, number[]>();
  let hits = 0;
  let cpu0 = process.cpuUsage();
  let pg0 = await backendTicks(db);
  for (let i = 0; i < SEARCHES + 20; i++) {
    if (i === 20) {
      cpu0 = process.cpuUsage();
      pg0 = await backendTicks(db);
    }
    const { kind, query } = searchQuery(i);
    const s = performance.now();
    // Half the calls name the source, half search every granted source (the grant filter is then the only filter).
    const r = await client.callTool({ name: 'search_documents', arguments: i % 2 === 0 ? { query, source: 'bench', limit: 10 } : { query, limit: 10 } });
    const ms = performance.now() - s;
    if (r.isError) throw new Error(`search failed: ${query}: ${JSON.stringify(r.structuredContent)}`);
    if (i >= 20) {
      times.push(ms);
      byKind.set(kind, [...(byKind.get(kind) ?? []), ms]);
    }
    hits += ((r.structuredContent as { results: unknown[] }).results ?? []).length;
  }
  const pgTicks = (await backendTicks(db)) - pg0;
  const cpu = process.cpuUsage(cpu0);
  const load1 = loadavg();
  // The MCP round trip itself (authentication, one audit entry, JSON-RPC over HTTP): list_sources, same client.
  const baseTimes: number[] = [];
  for (let i = 0; i < SEARCHES + 20; i++) {
    const s = performance.now();
    await client.callTool({ name: 'list_sources', arguments: {} });
    if (i >= 20) baseTimes.push(performance.now() - s);
  }
  await client.close();
  // The index query alone, as the tool runs it (backend CPU from /proc, as above).
  const queryTimes: number[] = [];
  const q0 = await backendTicks(db);
  for (let i = 0; i < SEARCHES; i++) {
    const s = performance.now();
    await searchPages(db, searchQuery(i).query, ['bench'], 40);
    queryTimes.push(performance.now() - s);
  }
  const queryTicks = (await backendTicks(db)) - q0;
  const writing = await searchWhileWriting(world);
  // Quality: top 10 against ranking every matching page (no candidate bound), per kind of query.
  const recall = new Map<string, number[]>();
  for (let i = 0; i < 36; i++) {
    const { kind, query } = searchQuery(i);
    const got = new Set((await searchPages(db, query, ['bench'], 10)).map((h) => `${h.path}#${h.page_no}`));
    const exact = await sql<{ k: string }>`
      select d.path || '#' || p.page_no as k from ingestion_document_pages p join ingestion_documents d on d.id = p.document_id,
        websearch_to_tsquery('english', ${query}) q
      where p.tsv @@ q and d.source_id = 'bench' order by ts_rank(p.tsv, q) desc, d.id, p.page_no limit 10`.execute(db);
    const share = exact.rows.length === 0 ? 1 : exact.rows.filter((r) => got.has(r.k)).length / exact.rows.length;
    recall.set(kind, [...(recall.get(kind) ?? []), share]);
  }
  // EXPLAIN (ANALYZE, BUFFERS) of a very common, a middling and a rare word, as searchPages runs them, and of each band
  // the candidate function runs for them (its bitmap index scan is where a bad index layout shows: decision record 0026 §2).
  for (const query of [zipfWord(1), zipfWord(700), zipfWord(20_000)]) {
    const search = (await searchStatement(db, query, ['bench'], 40))!;
    const plan = await sql<{ 'QUERY PLAN': string }>`explain (analyze, buffers) ${search.statement}`.execute(db);
    console.log(`\nEXPLAIN (ANALYZE, BUFFERS) ${query}:`);
    for (const r of plan.rows) {
      const l = r['QUERY PLAN'];
      if (/^\s*(->\s+)?(Limit|Sort|Nested|Function|Index|Hash|Seq)|Buffers|Execution Time|Planning Time/.test(l)) console.log(`  ${l}`);
    }
    await explainBands(db, search.bands, search.tags);
  }

  times.sort((a, b) => a - b);
  baseTimes.sort((a, b) => a - b);
  queryTimes.sort((a, b) => a - b);
  const p50 = quantile(times, 0.5);
  const p95 = quantile(times, 0.95);
  return () => {
    console.log(`search_documents over ${pages} pages via MCP: p50 ${p50.toFixed(1)} ms, p95 ${p95.toFixed(1)} ms (${SEARCHES} searches, ${hits} results; load average ${load0} before, ${load1} after)`);
    console.log(`  CPU per search: PostgreSQL backends ${((pgTicks * 1000) / CLOCK_TICKS / SEARCHES).toFixed(1)} ms, gateway + MCP client process ${((cpu.user + cpu.system) / 1000 / SEARCHES).toFixed(1)} ms`);
    for (const [kind, t] of byKind) {
      t.sort((a, b) => a - b);
      const r = recall.get(kind) ?? [];
      console.log(`  ${kind.padEnd(16)} p50 ${quantile(t, 0.5).toFixed(1).padStart(6)} ms  p95 ${quantile(t, 0.95).toFixed(1).padStart(6)} ms  top-10 overlap with exhaustive ranking ${r.length ? ((100 * r.reduce((a, b) => a + b, 0)) / r.length).toFixed(0) : '-'}%`);
    }
    console.log(`  the index query alone: p50 ${quantile(queryTimes, 0.5).toFixed(1)} ms, p95 ${quantile(queryTimes, 0.95).toFixed(1)} ms, PostgreSQL CPU ${((queryTicks * 1000) / CLOCK_TICKS / SEARCHES).toFixed(1)} ms per query`);
    console.log(`  the index query alone on one backend: ${writing.idleMs.toFixed(1)} ms CPU per query; ${writing.writingMs.toFixed(1)} ms while another connection wrote ${writing.pages} pages (a document per transaction), pending list at most ${writing.pendingLimitKb} kB`);
    console.log(`  MCP round trip baseline (list_sources): p50 ${quantile(baseTimes, 0.5).toFixed(1)} ms, p95 ${quantile(baseTimes, 0.95).toFixed(1)} ms`);
    line(`search_documents p95 (${pages} pages)`, `${p95.toFixed(1)} ms`, '≤ 50 ms', p95 <= 50);
  };
}

/** EXPLAIN (ANALYZE, BUFFERS) of each band as the candidate function runs it, until it has its candidates. */
async function explainBands(db: Db, bands: readonly string[], tags: readonly number[]): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await sql`set local enable_seqscan = off`.execute(trx);
    let taken = 0;
    for (const [i, band] of bands.entries()) {
      const plan = await sql<{ 'QUERY PLAN': string }>`explain (analyze, buffers)
        select k.document_id, k.page_no from ingestion_page_keys k where k.keys @@ ${band}::tsquery and k.source_tag = any(${sql.val([...tags])}::integer[])
        limit ${SEARCH_CANDIDATES - taken}`.execute(trx);
      const lines = plan.rows.map((r) => r['QUERY PLAN']);
      const index = lines.find((l) => l.includes('Bitmap Index Scan')) ?? '';
      const buffers = lines.find((l) => l.includes('Buffers')) ?? '';
      const rows = Number(/actual time=[\d.]+\.\.[\d.]+ rows=(\d+)/.exec(lines[0] ?? '')?.[1] ?? 0);
      const time = /actual time=([\d.]+)\.\.([\d.]+) rows=(\d+)/.exec(index);
      console.log(`  band ${String(i + 1).padStart(2)}: ${String(rows).padStart(3)} rows; index scan ${time ? `${time[2]} ms, ${time[3]} rows` : '-'}; ${buffers.trim()}`);
      taken += rows;
      if (taken >= SEARCH_CANDIDATES) break;
    }
  });
}

/**
 * The index query on one reserved backend (its own CPU from /proc), idle and then while another connection writes
 * documents as a worker does: what the GIN pending list adds to a search during ingestion (decision record 0026 §6).
 */
async function searchWhileWriting(world: IngestionWorld): Promise<{ idleMs: number; writingMs: number; pages: number; pendingLimitKb: number }> {
  const db = world.svc.running.services.db;
  expectOk(await world.admin('POST', '/api/data-sources', { name: 'Bench writes', source_id: 'bench-writes', source_type: 'files', connection_config: { root: world.root }, create_default_roles: true }));
  const limit = await sql<{ kb: number }>`
    select coalesce((select split_part(o, '=', 2)::int from unnest(c.reloptions) o where o like 'gin_pending_list_limit=%'), current_setting('gin_pending_list_limit')::int) as kb
    from pg_class c where c.relname = 'ingestion_page_keys_keys_idx'`.execute(db);
  return db.connection().execute(async (conn) => {
    const pid = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(conn)).rows[0]!.pid;
    const measure = async () => {
      const t0 = procTicks(pid);
      for (let i = 0; i < SEARCHES; i++) await searchPages(conn, searchQuery(i).query, ['bench'], 40);
      return ((procTicks(pid) - t0) * 1000) / CLOCK_TICKS / SEARCHES;
    };
    const idleMs = await measure();
    let stop = false;
    let written = 0;
    const writer = (async () => {
      for (let d = 0; !stop; d++, written++) await saveBenchDocument(db, 'bench-writes', `writes/doc-${d}.pdf`, pdfPages(DOCS + d));
    })();
    const writingMs = await measure().finally(() => (stop = true));
    await writer;
    await sql`delete from ingestion_documents where source_id = 'bench-writes'`.execute(db);
    return { idleMs, writingMs, pages: written * PAGES, pendingLimitKb: limit.rows[0]!.kb };
  });
}

function expectOk<T extends { status: number; text: string }>(a: T): T {
  if (a.status >= 300) throw new Error(`${a.status} ${a.text}`);
  return a;
}

await main();
