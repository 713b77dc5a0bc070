// Ingestion benchmark (`npm run bench:ingest`): 1,000 ten-page text PDFs ingested by one and by two real worker processes against pdftotext extracting the same files in one process (goal ≥ 0.5×), worker RSS (goal < 300 MB), and search_documents p95 over 100k indexed pages through MCP (goal ≤ 50 ms).
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
import { searchPages } from '../src/store/repos/documents.js';

const run = promisify(execFile);
const DOCS = Number(process.env.BENCH_INGEST_DOCS ?? 1_000);
const PAGES = 10;
const SEARCH_PAGES = Number(process.env.BENCH_INGEST_SEARCH_PAGES ?? 100_000);
const SEARCHES = Number(process.env.BENCH_INGEST_SEARCHES ?? 300);
const VOCAB = 50_000;

/** A deterministic word: `w` + base-36 of a pseudo-random index (so pages differ and terms are selective). */
function word(seed: number): string {
  return `w${((seed * 2654435761) % VOCAB >>> 0).toString(36)}`;
}

async function makePdf(doc: number): Promise<Uint8Array> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  for (let p = 0; p < PAGES; p++) {
    const page = pdf.addPage([595, 842]);
    for (let line = 0; line < 40; line++) {
      const words = Array.from({ length: 10 }, (_, i) => word(doc * 10_007 + p * 409 + line * 13 + i));
      page.drawText(`Line ${line + 1} of page ${p + 1}: ${words.join(' ')}`, { x: 40, y: 800 - line * 19, size: 10, font });
    }
  }
  return pdf.save();
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
  await Promise.all(procs.map((p) => p.stop('SIGTERM')));
  return { docsPerSecond: DOCS / seconds, maxRssMb: maxRss, peakMb: peak, cpuMsPerDoc: (cpu * 1000) / DOCS };
}

async function main(): Promise<void> {
  const world = await startIngestionWorld({ SERVICE_INGESTION__POLL_INTERVAL_MS: '100' }, { role: 'all' });
  try {
    const dir = path.join(world.root, 'bench');
    await mkdir(dir);
    const t0 = performance.now();
    for (let i = 0; i < DOCS; i++) await writeFile(path.join(dir, `doc-${i}.pdf`), await makePdf(i));
    console.log(`generated ${DOCS} PDFs of ${PAGES} pages in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    // Baseline: pdftotext over the same files, one after another in one process.
    const b0 = performance.now();
    for (let i = 0; i < DOCS; i++) await run('pdftotext', ['-q', path.join(dir, `doc-${i}.pdf`), '-']);
    const baseline = DOCS / ((performance.now() - b0) / 1000);

    expectOk(await world.admin('POST', '/api/data-sources', { name: 'Bench', source_id: 'bench', source_type: 'files', connection_config: { root: world.root }, create_default_roles: true }));
    const sync = expectOk(await world.admin('POST', '/api/data-sources/bench/sync'));
    if (sync.json.jobs_created !== DOCS) throw new Error(`sync created ${sync.json.jobs_created} jobs`);

    const one = await ingestWith(world, 1);
    console.log(`pdftotext ${baseline.toFixed(1)} docs/s; gatehouse 1 worker ${one.docsPerSecond.toFixed(1)} docs/s, max RSS ${one.maxRssMb.toFixed(0)} MB (peak ${one.peakMb.toFixed(0)} MB), ${one.cpuMsPerDoc.toFixed(1)} ms CPU/doc`);
    const two = await ingestWith(world, 2);
    console.log(`gatehouse 2 workers ${two.docsPerSecond.toFixed(1)} docs/s, max RSS per worker ${two.maxRssMb.toFixed(0)} MB (peak ${two.peakMb.toFixed(0)} MB)`);

    // Top the index up to SEARCH_PAGES pages of the same kind of text, then search through MCP.
    const db = world.svc.running.services.db;
    const have = Number((await sql<{ n: number }>`select count(*)::int as n from ingestion_document_pages`.execute(db)).rows[0]!.n);
    const extraDocs = Math.ceil(Math.max(0, SEARCH_PAGES - have) / PAGES);
    await sql`insert into ingestion_documents (source_id, path, content_type, byte_size, sha256, page_count)
      select 'bench', 'synthetic/' || g || '.pdf', 'application/pdf', 0, md5(g::text), ${PAGES} from generate_series(1, ${extraDocs}) g`.execute(db);
    const ids = (await sql<{ id: number }>`select id from ingestion_documents where path like 'synthetic/%' order by id`.execute(db)).rows.map((r) => r.id);
    // In batches: one statement per 200 documents stays well inside the statement timeout on a busy machine.
    for (let i = 0; i < ids.length; i += 200) {
      const batch = ids.slice(i, i + 200);
      await sql`insert into ingestion_document_pages (document_id, page_no, text)
        select d, p, (select string_agg('w' || to_hex(((d * 7919 + p * 104729 + k * 31) % ${VOCAB})::int), ' ') from generate_series(1, 300) k)
        from unnest(${sql.val(batch)}::bigint[]) d, generate_series(1, ${PAGES}) p`.execute(db);
    }
    await sql`analyze ingestion_document_pages`.execute(db);
    const pages = Number((await sql<{ n: number }>`select count(*)::int as n from ingestion_document_pages`.execute(db)).rows[0]!.n);

    const agent = await world.agent('bench-reader', [{ source_id: 'bench', role_key: 'reader' }]);
    const client = new Client({ name: 'bench', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${world.svc.gatewayUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.key}` } } }));
    const times: number[] = [];
    let hits = 0;
    for (let i = 0; i < SEARCHES + 20; i++) {
      const query = i % 2 === 0 ? word(i * 7 + 3) : `${word(i * 11 + 5)} ${word(i * 13 + 1)}`;
      const s = performance.now();
      const r = await client.callTool({ name: 'search_documents', arguments: { query, source: 'bench', limit: 10 } });
      if (i >= 20) times.push(performance.now() - s);
      if (r.isError) throw new Error(`search failed: ${JSON.stringify(r.structuredContent)}`);
      hits += ((r.structuredContent as { results: unknown[] }).results ?? []).length;
    }
    // The MCP round trip itself (authentication, one audit entry, JSON-RPC over HTTP): list_sources, same client.
    const baseTimes: number[] = [];
    for (let i = 0; i < SEARCHES + 20; i++) {
      const s = performance.now();
      await client.callTool({ name: 'list_sources', arguments: {} });
      if (i >= 20) baseTimes.push(performance.now() - s);
    }
    // The index query alone, as the tool runs it.
    const queryTimes: number[] = [];
    for (let i = 0; i < SEARCHES; i++) {
      const s = performance.now();
      await searchPages(db, i % 2 === 0 ? word(i * 7 + 3) : `${word(i * 11 + 5)} ${word(i * 13 + 1)}`, ['bench'], 40);
      queryTimes.push(performance.now() - s);
    }
    baseTimes.sort((a, b) => a - b);
    queryTimes.sort((a, b) => a - b);
    await client.close();
    times.sort((a, b) => a - b);
    const p50 = quantile(times, 0.5);
    const p95 = quantile(times, 0.95);

    const line = (name: string, value: string, goal: string, pass: boolean) => console.log(`${name.padEnd(44)} ${value.padEnd(22)} goal ${goal.padEnd(12)} ${pass ? 'PASS' : 'FAIL'}`);
    console.log(`\npdftotext, one process:   ${baseline.toFixed(1)} docs/s`);
    console.log(`gatehouse, 1 worker:      ${one.docsPerSecond.toFixed(1)} docs/s (max RSS ${one.maxRssMb.toFixed(0)} MB, VmHWM ${one.peakMb.toFixed(0)} MB, ${one.cpuMsPerDoc.toFixed(1)} ms CPU/doc; ${BUILT ? 'built' : 'tsx'})`);
    console.log(`gatehouse, 2 workers:     ${two.docsPerSecond.toFixed(1)} docs/s (max RSS per worker ${two.maxRssMb.toFixed(0)} MB, VmHWM ${two.peakMb.toFixed(0)} MB)`);
    console.log(`search_documents over ${pages} pages via MCP: p50 ${p50.toFixed(1)} ms, p95 ${p95.toFixed(1)} ms (${SEARCHES} searches, ${hits} results)`);
    console.log(`  of which the index query alone: p50 ${quantile(queryTimes, 0.5).toFixed(1)} ms, p95 ${quantile(queryTimes, 0.95).toFixed(1)} ms`);
    console.log(`  MCP round trip baseline (list_sources): p50 ${quantile(baseTimes, 0.5).toFixed(1)} ms, p95 ${quantile(baseTimes, 0.95).toFixed(1)} ms\n`);
    line('1 worker ÷ pdftotext', `${(one.docsPerSecond / baseline).toFixed(2)}×`, '≥ 0.5×', one.docsPerSecond / baseline >= 0.5);
    line('2 workers ÷ pdftotext', `${(two.docsPerSecond / baseline).toFixed(2)}×`, '≥ 0.5×', two.docsPerSecond / baseline >= 0.5);
    const rss = Math.max(one.maxRssMb, two.maxRssMb, one.peakMb, two.peakMb);
    line(`worker RSS (peak, ${BUILT ? 'built' : 'tsx'})`, `${rss.toFixed(0)} MB`, '< 300 MB', rss < 300);
    line(`search_documents p95 (${pages} pages)`, `${p95.toFixed(1)} ms`, '≤ 50 ms', p95 <= 50);
  } finally {
    await world.stop();
  }
}

function expectOk<T extends { status: number; text: string }>(a: T): T {
  if (a.status >= 300) throw new Error(`${a.status} ${a.text}`);
  return a;
}

await main();
