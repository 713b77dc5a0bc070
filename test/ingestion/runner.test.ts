// The ingestion runner with real worker processes, real PostgreSQL and real files: 200 jobs over two workers each done exactly once, priority order.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completedJobIds, startIngestionWorld, type IngestionWorld } from './support.js';
import { waitFor } from '../support/wait.js';

let world: IngestionWorld;

beforeAll(async () => {
  world = await startIngestionWorld();
  const made = await world.admin('POST', '/api/data-sources', { name: 'Shared drive', source_id: 'drive', source_type: 'files', connection_config: { root: world.root } });
  expect(made.status, made.text).toBe(201);
}, 120_000);
afterAll(async () => world?.stop());

describe('runner', () => {
  it('runs jobs in priority order, then oldest first', async () => {
    const order = [
      ['low.txt', 0],
      ['high.txt', 10],
      ['mid-old.txt', 5],
      ['mid-new.txt', 5],
      ['negative.txt', -1],
    ] as const;
    for (const [name, priority] of order) {
      await writeFile(path.join(world.root, name), `document ${name}\n`);
      const a = await world.admin('POST', '/api/jobs', { source_id: 'drive', file_path: name, priority_score: priority });
      expect(a.status, a.text).toBe(201);
    }
    // One worker, one job at a time: the claim order is the run order.
    const w = await world.worker('prio-1', { SERVICE_WORKER__CONCURRENCY: '1' });
    await world.waitForJobs((jobs) => jobs.length === 5 && jobs.every((j) => j.status === 'completed'), 60_000, 'priority jobs');
    // A job's completion is logged after it is committed: its line may reach the pipe after the database shows it.
    await waitFor(() => completedJobIds(w.output().stdout).length >= 5, 10_000, 'the completion log lines');
    const ran = completedJobIds(w.output().stdout);
    const byId = new Map((await world.jobs()).map((j) => [j.id, j.file_path]));
    expect(ran.map((id) => byId.get(id))).toEqual(['high.txt', 'mid-old.txt', 'mid-new.txt', 'low.txt', 'negative.txt']);
    await w.stop('SIGTERM');
  }, 120_000);

  it('two workers run 200 jobs, each exactly once', async () => {
    const before = new Set((await world.jobs()).map((j) => j.id));
    for (let i = 0; i < 200; i++) await writeFile(path.join(world.root, `bulk-${i}.md`), `# Bulk ${i}\n\nThe quarterly number ${i} of the bulk set.\n`);
    const [a, b] = await Promise.all([world.worker('bulk-a'), world.worker('bulk-b')]);
    for (let i = 0; i < 200; i++) {
      const r = await world.admin('POST', '/api/jobs', { source_id: 'drive', file_path: `bulk-${i}.md` });
      expect(r.status, r.text).toBe(201);
    }
    await world.waitForJobs((jobs) => jobs.filter((j) => !before.has(j.id)).length === 200 && jobs.every((j) => j.status === 'completed'), 120_000, '200 jobs completed');
    await waitFor(() => completedJobIds(a.output().stdout).length + completedJobIds(b.output().stdout).length >= 200, 10_000, 'the completion log lines');
    const ranA = completedJobIds(a.output().stdout);
    const ranB = completedJobIds(b.output().stdout);
    const all = [...ranA, ...ranB];
    expect(all.length).toBe(200);
    expect(new Set(all).size).toBe(200);
    expect(ranA.length).toBeGreaterThan(0);
    expect(ranB.length).toBeGreaterThan(0);
    const jobs = (await world.jobs()).filter((j) => !before.has(j.id));
    expect(jobs.every((j) => j.retry_count === 0 && j.error_message === null)).toBe(true);
    // Each job's recorded worker is the one whose log says it completed it.
    for (const j of jobs) expect(ranA.includes(j.id) ? 'bulk-a' : 'bulk-b').toBe(j.worker_id);
    const docs = await world.svc.running.services.db.selectFrom('ingestion_documents').select(['path', 'page_count']).where('path', 'like', 'bulk-%').execute();
    expect(docs.length).toBe(200);
    await Promise.all([a.stop('SIGTERM'), b.stop('SIGTERM')]);
  }, 240_000);
});
