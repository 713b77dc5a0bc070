// Scheduled source sync on real worker processes and real PostgreSQL (docs/ingestion.md "Scheduled sync", decision record 0025): two workers, each due period synced exactly once; new files become jobs; failures recorded and retried at the next period; a disabled schedule runs nothing; a dead holder does not block the next period; the API's 422s, 404s and 409s.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngestionWorld, type IngestionWorld } from './support.js';
import { ConsoleClient } from '../console/support/pages.js';
import { OWNER_PASSWORD } from '../support/world.js';
import { waitFor } from '../support/wait.js';

const INTERVAL = 2;
let world: IngestionWorld;

interface Run {
  id: number;
  source_id: string;
  trigger: 'schedule' | 'manual';
  scheduled_for: string | null;
  worker_id: string | null;
  status: 'running' | 'succeeded' | 'failed';
  started_at: string;
  finished_at: string | null;
  error_message: string | null;
  result: { assets_seen: number; jobs_created: number; jobs_requeued: number } | null;
}

async function runs(sourceId: string): Promise<Run[]> {
  const page = await world.admin('GET', `/api/data-sources/${sourceId}/sync/runs?limit=100`);
  expect(page.status, page.text).toBe(200);
  return (page.json.items as Run[]).slice().reverse();
}

/** "scheduled sync completed"/"failed" log lines of the workers' output, by source and period. */
function logged(stdouts: string[], sourceId: string): Array<{ msg: string; period: string; worker: string }> {
  const out = [];
  for (const [i, stdout] of stdouts.entries()) {
    for (const line of stdout.split('\n')) {
      if (!line.includes('"scheduled sync ')) continue;
      const o = JSON.parse(line) as { msg: string; source_id: string; period: string };
      if (o.source_id === sourceId) out.push({ msg: o.msg, period: o.period, worker: String(i) });
    }
  }
  return out;
}

beforeAll(async () => {
  world = await startIngestionWorld({ SERVICE_INGESTION__SYNC__MIN_INTERVAL_SECONDS: '1', SERVICE_INGESTION__SYNC__TIMEOUT_SECONDS: '5' });
  expect((await world.admin('POST', '/api/data-sources', { name: 'Scheduled drive', source_id: 'sched', source_type: 'files', connection_config: { root: world.root } })).status).toBe(201);
  expect((await world.admin('POST', '/api/data-sources', { name: 'Other drive', source_id: 'other', source_type: 'files', connection_config: { root: world.root } })).status).toBe(201);
  await writeFile(path.join(world.root, 'a.txt'), 'first document\n');
  await writeFile(path.join(world.root, 'b.md'), '# second document\n');
}, 120_000);
afterAll(async () => world?.stop());

describe('the schedule API', () => {
  it('answers 422 in the spec shape for bad schedules', async () => {
    const put = (body: unknown) => world.admin('PUT', '/api/data-sources/other/sync/schedule', body);
    const cases: Array<[unknown, string, string]> = [
      [{ interval_seconds: 0 }, 'interval_seconds', 'at least 1 seconds'],
      [{ interval_seconds: 30 * 86_400 + 1 }, 'interval_seconds', 'at most 2592000'],
      [{ interval_seconds: 1.5 }, 'interval_seconds', 'whole number'],
      [{ interval_seconds: '60' }, 'interval_seconds', ''],
      [{ interval_seconds: 60, enabled: 'yes' }, 'enabled', ''],
      [{ interval_seconds: 60, every: 'day' }, 'every', ''],
      [{}, 'interval_seconds', 'required'],
    ];
    for (const [body, field, msg] of cases) {
      const res = await put(body);
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(422);
      const item = (res.json.detail as Array<{ loc: unknown[]; msg: string; type: string }>).find((d) => JSON.stringify(d.loc) === JSON.stringify(['body', field]));
      expect(item, `${JSON.stringify(body)}: ${res.text}`).toBeDefined();
      expect(typeof item!.type).toBe('string');
      if (msg) expect(item!.msg).toContain(msg);
    }
    // Nothing was stored by a refused write.
    expect((await world.admin('GET', '/api/data-sources/other/sync')).json).toEqual({ source_id: 'other', connector_key: 'files', schedule: null, last_run: null });
  });

  it('answers 404 for an unknown source or schedule and 409 for a source that holds no documents', async () => {
    expect((await world.admin('PUT', '/api/data-sources/nope/sync/schedule', { interval_seconds: 60 })).status).toBe(404);
    expect((await world.admin('GET', '/api/data-sources/nope/sync')).status).toBe(404);
    expect((await world.admin('GET', '/api/data-sources/nope/sync/runs')).status).toBe(404);
    expect((await world.admin('DELETE', '/api/data-sources/other/sync/schedule')).status).toBe(404);
    expect(
      (await world.admin('POST', '/api/data-sources', { name: 'A database', source_id: 'db', source_type: 'postgres', connection_config: { host: '127.0.0.1', port: 5432, database: 'x', user: 'x' } })).status,
    ).toBe(201);
    const refused = await world.admin('PUT', '/api/data-sources/db/sync/schedule', { interval_seconds: 60 });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.text).toContain('holds no documents');
    expect((await world.admin('POST', '/api/data-sources/db/sync')).status).toBe(409);
  });

  it('sets, shows, changes and removes a schedule, audited; a manual sync is recorded as a run', async () => {
    const set = await world.admin('PUT', '/api/data-sources/other/sync/schedule', { interval_seconds: 3600, enabled: false });
    expect(set.status, set.text).toBe(200);
    expect(set.json).toMatchObject({ interval_seconds: 3600, enabled: false });
    const planned = Date.parse(set.json.next_sync_at as string);
    expect(Math.abs(planned - Date.now())).toBeLessThan(5_000);
    // A longer interval never pushes a planned period back.
    const longer = await world.admin('PUT', '/api/data-sources/other/sync/schedule', { interval_seconds: 7200, enabled: false });
    expect(Date.parse(longer.json.next_sync_at as string)).toBe(planned);
    const manual = await world.admin('POST', '/api/data-sources/other/sync');
    expect(manual.status, manual.text).toBe(200);
    expect(manual.json).toEqual({ source_id: 'other', connector_key: 'files', assets_seen: 2, jobs_created: 2, jobs_requeued: 0 });
    const status = (await world.admin('GET', '/api/data-sources/other/sync')).json;
    expect(status.schedule).toMatchObject({ interval_seconds: 7200, enabled: false });
    expect(status.last_run).toMatchObject({ trigger: 'manual', status: 'succeeded', scheduled_for: null, worker_id: null, error_message: null, result: manual.json });
    expect(status.last_run.finished_at).not.toBeNull();
    expect(world.audits.map((a) => a.action)).toEqual(expect.arrayContaining(['data_source.sync_schedule.update', 'data_source.sync']));
    const del = await world.admin('DELETE', '/api/data-sources/other/sync/schedule');
    expect(del.json).toEqual({ deleted: true, source_id: 'other' });
    expect(world.audits.map((a) => a.action)).toContain('data_source.sync_schedule.delete');
    const after = (await world.admin('GET', '/api/data-sources/other/sync')).json;
    expect(after.schedule).toBeNull();
    expect(after.last_run.trigger).toBe('manual');
  });

  it('pages runs newest first with a cursor', async () => {
    await world.admin('POST', '/api/data-sources/other/sync');
    await world.admin('POST', '/api/data-sources/other/sync');
    const first = await world.admin('GET', '/api/data-sources/other/sync/runs?limit=2');
    expect(first.json.items).toHaveLength(2);
    expect(first.json.items[0].id).toBeGreaterThan(first.json.items[1].id);
    const second = await world.admin('GET', `/api/data-sources/other/sync/runs?limit=2&cursor=${first.json.next_cursor as string}`);
    expect(second.json.items).toHaveLength(1);
    expect(second.json.next_cursor).toBeNull();
    expect((await world.admin('GET', '/api/data-sources/other/sync/runs?cursor=bogus')).status).toBe(422);
  });
});

describe('scheduled sync on two worker processes', () => {
  it('runs each due period exactly once, turns new files into jobs, records failures and retries them at the next period, and runs nothing while disabled', async () => {
    const a = await world.worker('sched-a');
    const b = await world.worker('sched-b');
    const set = await world.admin('PUT', '/api/data-sources/sched/sync/schedule', { interval_seconds: INTERVAL });
    expect(set.status, set.text).toBe(200);
    const t0 = Date.parse(set.json.next_sync_at as string);

    // The first period is due at once: both files become jobs and are ingested.
    await world.waitForJobs((jobs) => jobs.filter((j) => j.file_path === 'a.txt' || j.file_path === 'b.md').length >= 4 && jobs.every((j) => j.status === 'completed'), 60_000, 'first scheduled sync ingested');
    // A new file is picked up by a later period.
    await writeFile(path.join(world.root, 'c.txt'), 'a third document\n');
    await waitFor(async () => (await runs('sched')).some((r) => r.result?.jobs_created === 1), 30_000, 'c.txt seen by a scheduled sync');
    await world.waitForJobs((jobs) => jobs.some((j) => j.file_path === 'c.txt' && j.status === 'completed'), 60_000, 'c.txt ingested');
    // Let a few more periods pass; the list is read when no period is in flight (one may start at any moment).
    let ok: Run[] = [];
    await waitFor(async () => {
      ok = await runs('sched');
      // At least one period after the one that saw c.txt, for the "nothing new" check below.
      const sawC = ok.findIndex((r) => r.result?.jobs_created === 1);
      return ok.length >= 6 && sawC >= 0 && sawC < ok.length - 1 && ok.every((r) => r.status !== 'running');
    }, 30_000, 'six periods');

    expect(ok.every((r) => r.trigger === 'schedule' && r.status === 'succeeded'), JSON.stringify(ok)).toBe(true);
    // Each period once: distinct periods on the interval's grid from the first one (periods missed under load collapse into the next).
    const periods = ok.map((r) => Date.parse(r.scheduled_for!));
    expect(new Set(periods).size).toBe(periods.length);
    expect(periods[0]).toBe(t0);
    for (let i = 1; i < periods.length; i++) {
      const gap = periods[i]! - periods[i - 1]!;
      expect(gap > 0 && gap % (INTERVAL * 1000) === 0, `period ${i}: ${gap} ms after the one before`).toBe(true);
    }
    // Every run's log line names its period once across both processes.
    const lines = logged([a.output().stdout, b.output().stdout], 'sched').filter((l) => l.msg === 'scheduled sync completed');
    const byPeriod = new Map<string, number>();
    for (const l of lines) byPeriod.set(l.period, (byPeriod.get(l.period) ?? 0) + 1);
    expect([...byPeriod.values()].every((n) => n === 1)).toBe(true);
    expect(byPeriod.size).toBeGreaterThanOrEqual(ok.length - 1);
    expect(`${a.output().stdout}${b.output().stdout}`).not.toContain('scheduled sync look failed');
    // A sync that finds nothing new creates nothing.
    expect(ok.at(-1)!.result).toEqual({ source_id: 'sched', connector_key: 'files', assets_seen: 3, jobs_created: 0, jobs_requeued: 0 });
    const status = (await world.admin('GET', '/api/data-sources/sched/sync')).json;
    expect(Date.parse(status.schedule.next_sync_at)).toBeGreaterThan(Date.parse(ok.at(-1)!.scheduled_for!));

    // A failing sync (the root moved out of ingestion.files_roots) is recorded with its error, and the next period runs again.
    expect((await world.admin('PATCH', '/api/data-sources/sched', { connection_config: { root: world.outside } })).status).toBe(200);
    await waitFor(async () => (await runs('sched')).filter((r) => r.status === 'failed').length >= 2, 30_000, 'two failed periods');
    const failed = (await runs('sched')).filter((r) => r.status === 'failed');
    expect(failed[0]!.error_message).toMatch(/^root_not_allowed: /);
    expect(failed[1]!.scheduled_for).not.toBe(failed[0]!.scheduled_for);
    expect(failed[0]!.result).toBeNull();
    expect(`${a.output().stdout}${b.output().stdout}`).toContain('scheduled sync failed');
    expect((await world.admin('PATCH', '/api/data-sources/sched', { connection_config: { root: world.root } })).status).toBe(200);

    // Disabled: nothing runs however long we wait (three intervals).
    expect((await world.admin('PUT', '/api/data-sources/sched/sync/schedule', { interval_seconds: INTERVAL, enabled: false })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1_000)); // a claim made just before the change may still finish
    const frozen = (await runs('sched')).length;
    await new Promise((r) => setTimeout(r, INTERVAL * 3 * 1000));
    expect((await runs('sched')).length).toBe(frozen);
    // A disabled source is not synced on schedule either.
    expect((await world.admin('PATCH', '/api/data-sources/sched', { enabled: false })).status).toBe(200);
    expect((await world.admin('PUT', '/api/data-sources/sched/sync/schedule', { interval_seconds: INTERVAL, enabled: true })).status).toBe(200);
    await new Promise((r) => setTimeout(r, INTERVAL * 2 * 1000));
    expect((await runs('sched')).length).toBe(frozen);
    expect((await world.admin('PATCH', '/api/data-sources/sched', { enabled: true })).status).toBe(200);
    await waitFor(async () => (await runs('sched')).length > frozen, 30_000, 'syncs again once enabled');
    await a.stop('SIGTERM');
    await b.stop('SIGTERM');
  }, 240_000);

  it('a run whose worker died is given up after its lease, and the next period runs; a deleted source takes its schedule and runs with it', async () => {
    const db = world.svc.running.services.db;
    expect((await world.admin('PUT', '/api/data-sources/other/sync/schedule', { interval_seconds: INTERVAL })).status).toBe(200);
    // A holder that died mid-sync: its run is still "running", its lease already lapsed.
    await sql`insert into ingestion_sync_runs (source_id, trigger, scheduled_for, worker_id, lease_expires_at, started_at)
      values ('other', 'schedule', now() - interval '1 hour', 'ghost', now() - interval '1 second', now() - interval '1 hour')`.execute(db);
    const w = await world.worker('sched-c');
    await waitFor(async () => (await runs('other')).some((r) => r.trigger === 'schedule' && r.worker_id === 'sched-c' && r.status === 'succeeded'), 30_000, 'next period after the dead holder');
    const ghost = (await runs('other')).find((r) => r.worker_id === 'ghost')!;
    expect(ghost).toMatchObject({ status: 'failed', error_message: 'abandoned: worker ghost did not finish before its lease expired' });

    expect((await world.admin('DELETE', '/api/data-sources/other')).status).toBe(200);
    const left = await sql<{ n: number }>`select (select count(*) from ingestion_sync_runs where source_id = 'other') + (select count(*) from ingestion_sync_schedules where source_id = 'other') as n`.execute(db);
    expect(Number(left.rows[0]!.n)).toBe(0);
    await new Promise((r) => setTimeout(r, INTERVAL * 1000 + 500));
    expect(w.output().stdout).not.toContain('scheduled sync look failed');
    await w.stop('SIGTERM');
  }, 120_000);

  it('a manual sync while another runs is refused with 409 and the reason', async () => {
    const db = world.svc.running.services.db;
    await sql`insert into ingestion_sync_runs (source_id, trigger, worker_id, lease_expires_at) values ('sched', 'manual', 'busy-w', now() + interval '1 minute')`.execute(db);
    const busy = await world.admin('POST', '/api/data-sources/sched/sync');
    expect(busy.status, busy.text).toBe(409);
    expect(busy.json.message ?? busy.text).toContain('already running');
    await sql`delete from ingestion_sync_runs where worker_id = 'busy-w'`.execute(db);
  });
});

describe('the console documents page', () => {
  it('shows the schedule and the last sync, and sets and removes the schedule through the same rules as the API', async () => {
    const owner = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
    const bad = await owner.post('/dashboard/data-sources/sched/sync/schedule', { interval_seconds: '0', enabled: 'on' });
    expect(bad.status, bad.text).toBe(422);
    expect(bad.text).toContain('at least 1 seconds');
    const good = await owner.post('/dashboard/data-sources/sched/sync/schedule', { interval_seconds: '3600' });
    expect(good.status, good.text).toBe(303);
    expect((await world.admin('GET', '/api/data-sources/sched/sync')).json.schedule).toMatchObject({ interval_seconds: 3600, enabled: false });
    const page = await owner.get('/dashboard/data-sources/sched/documents');
    expect(page.text).toContain('every 3600 s (paused)');
    expect(page.text).toContain('Remove schedule');
    expect(page.text).toMatch(/succeeded|failed/);
    const removed = await owner.post('/dashboard/data-sources/sched/sync/schedule/delete', {});
    expect(removed.status).toBe(303);
    expect((await owner.get('/dashboard/data-sources/sched/documents')).text).toContain('none: the source is synced only when asked');
    const refused = await owner.post('/dashboard/data-sources/db/sync', {});
    expect(refused.status).toBe(409);
    expect(refused.text).toContain('holds no documents');
  });
});
