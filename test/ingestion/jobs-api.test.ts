// The /api/jobs admin API against real PostgreSQL: every spec §2 field and default, keyset paging and filters, the state machine's 409s, 422s, permissions.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { sql } from 'kysely';
import { AdminClient } from '../support/admin-client.js';
import { startWorld, type World } from '../support/world.js';
import { expect422 } from '../admin/support.js';
import { filePathProblem } from '../../src/ingestion/paths.js';

let world: World;

const JOB_FIELDS = [
  'completed_at', 'created_at', 'error_message', 'file_path', 'id', 'last_error_at', 'lease_expires_at', 'llm_cost', 'metadata', 'ocr_cost', 'ocr_pages',
  'priority_score', 'progress_current', 'progress_total', 'retry_count', 'source_id', 'stage', 'started_at', 'status', 'updated_at', 'worker_id',
];

beforeAll(async () => {
  // Workers do not run jobs here: the API alone moves them.
  world = await startWorld({ env: { SERVICE_INGESTION__ENABLED: 'false' } });
  await world.httpSource('docs-a', 'http://example.com/a/');
  await world.httpSource('docs-b', 'http://example.com/b/');
}, 60_000);
afterAll(async () => world?.stop());

const setStatus = (id: number, status: string) => sql`update ingestion_jobs set status = ${status} where id = ${id}`.execute(world.svc.running.services.db);

describe('jobs API', () => {
  it('creates a job with the spec defaults and answers every field', async () => {
    const a = await world.admin('POST', '/api/jobs', { source_id: 'docs-a', file_path: 'reports/q1.pdf' });
    expect(a.status, a.text).toBe(201);
    expect(Object.keys(a.json).sort()).toEqual(JOB_FIELDS);
    expect(a.json).toMatchObject({
      source_id: 'docs-a', file_path: 'reports/q1.pdf', status: 'pending', priority_score: 0, llm_cost: 0, ocr_cost: 0, ocr_pages: 0,
      progress_current: 0, progress_total: null, retry_count: 0, stage: null, worker_id: null, metadata: {}, error_message: null,
      completed_at: null, started_at: null, last_error_at: null, lease_expires_at: null,
    });
    expect(Date.parse(a.json.created_at)).not.toBeNaN();
    const got = await world.admin('GET', `/api/jobs/${a.json.id}`);
    expect(got.json).toEqual(a.json);
    // One job per file of a source.
    expect((await world.admin('POST', '/api/jobs', { source_id: 'docs-a', file_path: 'reports/q1.pdf' })).status).toBe(409);
  });

  it('refuses bad input with 422 at the field', async () => {
    expect422(await world.admin('POST', '/api/jobs', { file_path: 'x' }), ['body', 'source_id']);
    expect422(await world.admin('POST', '/api/jobs', { source_id: 'docs-a', file_path: '../etc/passwd' }), ['body', 'file_path']);
    expect422(await world.admin('POST', '/api/jobs', { source_id: 'docs-a', file_path: '/abs' }), ['body', 'file_path']);
    expect422(await world.admin('POST', '/api/jobs', { source_id: 'docs-a', file_path: 'a', priority_score: 'high' }), ['body', 'priority_score']);
    expect422(await world.admin('POST', '/api/jobs', { source_id: 'docs-a', file_path: 'a', metadata: [] }), ['body', 'metadata']);
    expect422(await world.admin('POST', '/api/jobs', { source_id: 'no-such', file_path: 'a' }), ['body', 'source_id']);
    expect422(await world.admin('POST', '/api/jobs', { source_id: 'docs-a', file_path: 'a', extra: 1 }), ['body', 'extra']);
    expect422(await world.admin('GET', '/api/jobs/abc'), ['path', 'id']);
    expect422(await world.admin('GET', '/api/jobs?status=done'), ['query', 'status']);
    expect422(await world.admin('GET', '/api/jobs?cursor=bm9wZQ'), ['query', 'cursor']);
    expect422(await world.admin('PUT', '/api/jobs/1/priority', {}), ['body', 'priority_score']);
    expect((await world.admin('GET', '/api/jobs/999999')).status).toBe(404);
  });

  it('file_path rule: no spelling of a dot segment, absolute path or encoded traversal passes', () => {
    const bad = fc.oneof(
      fc.constantFrom('..', '.', '%2e%2e', '%2E%2e', '%2f', '%5c', '%00'),
      fc.tuple(fc.constantFrom('a/', 'x/y/', ''), fc.constantFrom('..', '.', '%2e%2e'), fc.constantFrom('', '/b', '/c/d')).map(([a, b, c]) => `${a}${b}${c}`),
      fc.string().map((s) => `/${s}`),
      fc.string().map((s) => `a\\${s}`),
    );
    fc.assert(fc.property(bad, (p) => filePathProblem(p) !== null));
    fc.assert(fc.property(fc.array(fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9_. -]{0,20}$/), { minLength: 1, maxLength: 5 }), (segs) => {
      fc.pre(segs.every((s) => s !== '.' && s !== '..'));
      return filePathProblem(segs.join('/')) === null;
    }));
  });

  it('lists newest first with filters and keyset pages that cover every job once', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 7; i++) ids.push((await world.admin('POST', '/api/jobs', { source_id: i % 2 ? 'docs-b' : 'docs-a', file_path: `page/${i}.html` })).json.id);
    const seen: number[] = [];
    let cursor: string | null = null;
    do {
      const page: { status: number; json: { items: Array<{ id: number; source_id: string }>; next_cursor: string | null } } = await world.admin('GET', `/api/jobs?source_id=docs-b&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.json.items.length).toBeLessThanOrEqual(2);
      for (const j of page.json.items) expect(j.source_id).toBe('docs-b');
      seen.push(...page.json.items.map((j) => j.id));
      cursor = page.json.next_cursor;
    } while (cursor);
    expect(seen).toEqual(ids.filter((_, i) => i % 2).reverse());
    await sql`update ingestion_jobs set worker_id = 'w-1' where id = ${ids[0]!}`.execute(world.svc.running.services.db);
    const byWorker = await world.admin('GET', '/api/jobs?worker_id=w-1');
    expect(byWorker.json.items.map((j: { id: number }) => j.id)).toEqual([ids[0]]);
    const byStatus = await world.admin('GET', '/api/jobs?status=running');
    expect(byStatus.json.items).toEqual([]);
  });

  it('moves along the state machine and answers 409 off it', async () => {
    const id = (await world.admin('POST', '/api/jobs', { source_id: 'docs-a', file_path: 'sm/1.txt', priority_score: 1.5, metadata: { owner: 'ops' } })).json.id as number;
    const pr = await world.admin('PUT', `/api/jobs/${id}/priority`, { priority_score: 9.25 });
    expect(pr.json).toMatchObject({ priority_score: 9.25, metadata: { owner: 'ops' } });
    // pending cannot be retried; it can be cancelled once.
    expect((await world.admin('POST', `/api/jobs/${id}/retry`)).status).toBe(409);
    const c = await world.admin('POST', `/api/jobs/${id}/cancel`);
    expect(c.json.status).toBe('cancelled');
    expect(c.json.completed_at).not.toBeNull();
    const again = await world.admin('POST', `/api/jobs/${id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.text).toContain('cancelled');
    const r = await world.admin('POST', `/api/jobs/${id}/retry`);
    expect(r.json).toMatchObject({ status: 'pending', retry_count: 0, completed_at: null });
    await setStatus(id, 'completed');
    expect((await world.admin('POST', `/api/jobs/${id}/retry`)).status).toBe(409);
    expect((await world.admin('POST', `/api/jobs/${id}/cancel`)).status).toBe(409);
    expect((await world.admin('PUT', `/api/jobs/${id}/priority`, { priority_score: 1 })).status).toBe(409);
    await setStatus(id, 'failed');
    expect((await world.admin('POST', `/api/jobs/${id}/retry`)).json.status).toBe('pending');
    expect((await world.admin('POST', '/api/jobs/999999/cancel')).status).toBe(404);
  });

  it('lets a viewer read jobs but not change them', async () => {
    const made = await world.admin('POST', '/api/admins', { username: 'jobviewer', password: 'viewer-password-1234', roles: ['viewer'], must_change_password: false });
    expect(made.status, made.text).toBe(201);
    const viewer = await AdminClient.signIn(world.svc.adminUrl, 'jobviewer', 'viewer-password-1234');
    expect((await viewer.request('GET', '/api/jobs')).status).toBe(200);
    expect((await viewer.request('POST', '/api/jobs', { json: { source_id: 'docs-a', file_path: 'v.txt' } })).status).toBe(403);
    expect((await viewer.request('POST', '/api/jobs/1/cancel')).status).toBe(403);
  });

  it('is in the OpenAPI document', async () => {
    const doc = await world.admin('GET', '/api/openapi.json');
    for (const p of ['/api/jobs', '/api/jobs/{id}', '/api/jobs/{id}/priority', '/api/jobs/{id}/retry', '/api/jobs/{id}/cancel']) expect(doc.json.paths[p], p).toBeDefined();
    expect(doc.json.paths['/api/jobs'].post.requestBody.content['application/json'].schema.properties.priority_score.default).toBe(0);
  });
});
