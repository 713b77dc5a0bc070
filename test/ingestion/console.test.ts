// The ingestion console pages against real PostgreSQL and a real worker process: jobs with progress and actions, workers, a source's documents with classification; viewer sees no buttons; axe in chromium.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { startIngestionWorld, type IngestionWorld } from './support.js';
import { ConsoleClient } from '../console/support/pages.js';
import { OWNER_PASSWORD } from '../support/world.js';
import { axeViolations, describeViolations, launchBrowser, openPage, signIn } from '../console/support/browser.js';

let world: IngestionWorld;
let owner: ConsoleClient;

beforeAll(async () => {
  world = await startIngestionWorld();
  expect((await world.admin('POST', '/api/data-sources', { name: 'Console drive', source_id: 'cdrive', source_type: 'files', connection_config: { root: world.root } })).status).toBe(201);
  await writeFile(path.join(world.root, 'people.txt'), 'Contact <b>jane@example.com</b> please\n');
  await writeFile(path.join(world.root, 'plain.md'), '# Nothing personal\n');
  owner = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
}, 120_000);
afterAll(async () => world?.stop());

describe('ingestion console', () => {
  it('syncs from the documents page, runs on a worker, and shows jobs, workers and documents', async () => {
    const sync = await owner.post('/dashboard/data-sources/cdrive/sync', {});
    expect(sync.status, sync.text).toBe(303);
    const w = await world.worker('console-w');
    await world.waitForJobs((jobs) => jobs.length === 2 && jobs.every((j) => j.status === 'completed'), 60_000, 'console jobs');
    const jobs = await owner.get('/dashboard/ingestion/jobs?source_id=cdrive');
    expect(jobs.status).toBe(200);
    expect(jobs.text).toContain('people.txt');
    expect(jobs.text).toContain('<progress');
    expect(jobs.text).toContain('href="/dashboard/ingestion/jobs"');
    const docs = await owner.get('/dashboard/data-sources/cdrive/documents');
    expect(docs.text).toContain('email × 1');
    expect(docs.text).toContain('none found');
    // Text from the document never reaches the page: only its path and classification do.
    expect(docs.text).not.toContain('jane@example.com');
    const workers = await owner.get('/dashboard/ingestion/workers');
    expect(workers.text).toContain('console-w');
    expect(workers.text).toContain('alive');
    await w.stop('SIGTERM');
  }, 120_000);

  it('retry, cancel and priority forms move jobs; an illegal one shows the reason; a viewer gets no buttons and 403', async () => {
    const db = world.svc.running.services.db;
    const [job] = (await world.jobs()).filter((j) => j.file_path === 'plain.md');
    await sql`update ingestion_jobs set status = 'failed' where id = ${job!.id}`.execute(db);
    expect((await owner.post(`/dashboard/ingestion/jobs/${job!.id}/retry`, {})).status).toBe(303);
    expect((await world.admin('GET', `/api/jobs/${job!.id}`)).json.status).toBe('pending');
    const prio = await owner.post(`/dashboard/ingestion/jobs/${job!.id}/priority`, { priority_score: '7.5' });
    expect(prio.status).toBe(303);
    expect((await world.admin('GET', `/api/jobs/${job!.id}`)).json.priority_score).toBe(7.5);
    expect((await owner.post(`/dashboard/ingestion/jobs/${job!.id}/cancel`, {})).status).toBe(303);
    const again = await owner.post(`/dashboard/ingestion/jobs/${job!.id}/cancel`, {});
    expect(again.status).toBe(409);
    expect(again.text).toContain('cancelled job cannot be given a cancel');
    const bad = await owner.post(`/dashboard/ingestion/jobs/${job!.id}/priority`, { priority_score: 'high' });
    expect(bad.status).toBe(422);
    expect((await owner.post(`/dashboard/ingestion/jobs/${job!.id}/retry`, {}, { csrf: false })).status).toBe(403);

    expect((await world.admin('POST', '/api/admins', { username: 'console-viewer', password: 'viewer-password-5678', roles: ['viewer'], must_change_password: false })).status).toBe(201);
    const viewer = await ConsoleClient.signIn(world.svc.adminUrl, 'console-viewer', 'viewer-password-5678');
    const page = await viewer.get('/dashboard/ingestion/jobs');
    expect(page.status).toBe(200);
    expect(page.text).not.toContain('/retry"');
    expect(page.text).not.toContain('Sync now');
    expect((await viewer.post(`/dashboard/ingestion/jobs/${job!.id}/retry`, {})).status).toBe(403);
  }, 60_000);

  it('has no serious accessibility violations in chromium', async () => {
    const browser = await launchBrowser();
    try {
      const w = await openPage(browser);
      await signIn(w.page, world.svc.adminUrl, 'admin', OWNER_PASSWORD);
      for (const p of ['/dashboard/ingestion/jobs', '/dashboard/ingestion/workers', '/dashboard/data-sources/cdrive/documents']) {
        await w.page.goto(`${world.svc.adminUrl}${p}`);
        const v = await axeViolations(w.page);
        expect(v, `${p}: ${describeViolations(v)}`).toEqual([]);
      }
      expect(w.consoleErrors).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 90_000);
});
