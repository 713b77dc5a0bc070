// The catalog through a running service: scan on save by the worker, on demand through the API, the tree with suggestions, scan history, changes acknowledged one and all (JSON and the console form), annotations (JSON and form), settings, and 422s.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../support/world.js';
import { bearer } from '../support/admin-client.js';
import { createSourceDatabase, type SourceDatabase } from './support.js';
import { fieldError } from '../console/support/pages.js';

const SOURCE = 'catalog-api';
let world: World;
let src: SourceDatabase;

async function until<T>(what: string, probe: () => Promise<T | null | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const form = (path: string, fields: Record<string, string>) => bearer(world.svc.adminUrl, world.token, 'POST', path, fields, 'application/x-www-form-urlencoded');

beforeAll(async () => {
  src = await createSourceDatabase();
  world = await startWorld({ privateSources: [SOURCE] });
});
afterAll(async () => {
  await world?.stop();
  await src?.close();
});

describe('catalog API', () => {
  it('a saved source is scanned by the worker (scan_on_save)', async () => {
    const created = await world.admin('POST', '/api/data-sources', { name: SOURCE, source_id: SOURCE, source_type: 'postgres', connection_config: src.config });
    expect(created.status).toBe(201);
    const body = await until('first snapshot', async () => {
      const a = await world.admin('GET', `/api/data-sources/${SOURCE}/catalog`);
      return a.json.snapshot ? a.json : null;
    });
    expect(body.snapshot).toMatchObject({ version: 1, status: 'ok', trigger: 'save', truncated: false });
    const users = body.tree.relations.find((r: { path: string }) => r.path === 'public.users');
    const email = users.columns.find((c: { name: string }) => c.name === 'email');
    expect(email).toMatchObject({ type: 'text', nullable: false, classification: null, suggested_classification: 'email', path: 'public.users.email' });
    expect(users.columns.find((c: { name: string }) => c.name === 'id').suggested_classification).toBeNull();
    const mixed = body.tree.relations.find((r: { path: string }) => r.path === '"Mixed Case"."Users"');
    expect(mixed.columns.map((c: { path: string }) => c.path)).toEqual(['"Mixed Case"."Users"."Id"', '"Mixed Case"."Users"."E.mail"']);
    // Search filters relations by path or column name.
    const searched = await world.admin('GET', `/api/data-sources/${SOURCE}/catalog?q=order`);
    expect(searched.json.tree.relations.map((r: { path: string }) => r.path).sort()).toEqual(['sales.order_totals', 'sales.orders']);
  });

  it('scans on demand, records the history, and lists changes', async () => {
    await src.sql('alter table public.users add column nickname text; alter table sales.orders add column tracking_code text; drop table public.events_2024;');
    const scanned = await world.admin('POST', `/api/data-sources/${SOURCE}/catalog/scan`, { wait_seconds: 20 });
    expect(scanned.status).toBe(200);
    expect(scanned.json.snapshot).toMatchObject({ version: 2, status: 'ok', trigger: 'demand', change_count: 3 });
    const history = await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/snapshots`);
    expect(history.json.map((s: { version: number }) => s.version)).toEqual([2, 1]);
    const open = await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/changes?status=open`);
    expect(open.json.map((c: { kind: string; path: string }) => `${c.kind} ${c.path}`).sort()).toEqual(['added public.users.nickname', 'added sales.orders.tracking_code', 'removed public.events_2024']);
    // nickname sits next to the email column, whose name suggests personal data... but only classified columns or a personal name protect.
    const nickname = open.json.find((c: { path: string }) => c.path === 'public.users.nickname');
    expect(nickname.protected).toBe(false);
  });

  it('acknowledges one change through the console form and the rest through JSON', async () => {
    const open = (await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/changes?status=open`)).json as Array<{ change_id: string; path: string }>;
    const one = open.find((c) => c.path === 'public.users.nickname')!;
    const posted = await form(`/dashboard/data-sources/${SOURCE}/catalog/changes/acknowledge`, { change_id: one.change_id });
    expect(posted.status).toBe(303);
    expect(posted.headers.get('location')).toBe(`/dashboard/data-sources/${SOURCE}/catalog#changes`);
    const left = (await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/changes?status=open`)).json as Array<{ change_id: string }>;
    expect(left.map((c) => c.change_id).sort()).toEqual(open.filter((c) => c !== one).map((c) => c.change_id).sort());
    const all = await world.admin('POST', `/api/data-sources/${SOURCE}/catalog/changes/acknowledge`, {});
    expect(all.status).toBe(200);
    expect(all.json.acknowledged).toHaveLength(2);
    expect((await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/changes?status=open`)).json).toEqual([]);
    const acked = (await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/changes?status=acknowledged`)).json as Array<{ acknowledged_by: string }>;
    expect(acked).toHaveLength(3);
    expect(acked.every((c) => c.acknowledged_by === 'admin')).toBe(true);
    // An unknown change_id is a 422 on change_id, by form (the page, with the message at the field) and by JSON.
    const bad = await form(`/dashboard/data-sources/${SOURCE}/catalog/changes/acknowledge`, { change_id: 'abcdef' });
    expect(bad.status).toBe(422);
    expect(fieldError(bad.text, 'change_id')).toBe('No change with this change_id for the source.');
    expect((await world.admin('POST', `/api/data-sources/${SOURCE}/catalog/changes/acknowledge`, { change_id: 'not hex' })).status).toBe(422);
    expect((await world.admin('POST', `/api/data-sources/no-such-source/catalog/changes/acknowledge`, {})).status).toBe(404);
  });

  it('annotates through the form and JSON; an empty classification removes; bad paths are 422', async () => {
    const posted = await form(`/dashboard/data-sources/${SOURCE}/catalog/annotations`, { path: 'public.users.email', classification: 'email' });
    expect(posted.status).toBe(303);
    const quoted = await world.admin('PUT', `/api/data-sources/${SOURCE}/catalog/annotations`, { path: '"Mixed Case"."Users"."E.mail"', classification: 'email' });
    expect(quoted.status).toBe(200);
    expect(quoted.json.path).toBe('"Mixed Case"."Users"."E.mail"');
    const list = await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/annotations`);
    expect(list.json.map((a: { path: string; classification: string }) => `${a.path}=${a.classification}`)).toEqual(['"Mixed Case"."Users"."E.mail"=email', 'public.users.email=email']);
    const tree = await world.admin('GET', `/api/data-sources/${SOURCE}/catalog?q=users`);
    const email = tree.json.tree.relations.find((r: { path: string }) => r.path === 'public.users').columns.find((c: { name: string }) => c.name === 'email');
    expect(email.classification).toBe('email');
    // Unquoted names fold to lower case, as PostgreSQL reads them: Public.USERS.Email is public.users.email.
    const removed = await form(`/dashboard/data-sources/${SOURCE}/catalog/annotations`, { path: 'Public.USERS.Email', classification: '' });
    expect(removed.status).toBe(303);
    expect((await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/annotations`)).json).toHaveLength(1);
    for (const [path, classification, field] of [
      ['public.users', 'email', 'path'],
      ['public.users.nope', 'email', 'path'],
      ['public."Users".email', 'email', 'path'],
      ['public.users.email', 'Not A Tag!', 'classification'],
    ] as const) {
      const a = await world.admin('PUT', `/api/data-sources/${SOURCE}/catalog/annotations`, { path, classification });
      expect(a.status, path).toBe(422);
      expect(a.json.detail[0].loc).toEqual(['body', field]);
    }
    const missing = await form(`/dashboard/data-sources/${SOURCE}/catalog/annotations`, { classification: 'email' });
    expect(missing.status).toBe(422);
    expect(fieldError(missing.text, 'path')).toBe('This field is required.');
  });

  it('drift protection is a per-source setting, on by default', async () => {
    expect((await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/settings`)).json).toEqual({ source_id: SOURCE, drift_protection: true });
    expect((await world.admin('PUT', `/api/data-sources/${SOURCE}/catalog/settings`, { drift_protection: false })).json.drift_protection).toBe(false);
    expect((await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/settings`)).json.drift_protection).toBe(false);
    expect((await world.admin('PUT', `/api/data-sources/${SOURCE}/catalog/settings`, { drift_protection: 'yes' })).status).toBe(422);
    await world.admin('PUT', `/api/data-sources/${SOURCE}/catalog/settings`, { drift_protection: true });
  });

  it('records admin actions in the audit trail', () => {
    const actions = world.audits.map((a) => a.action);
    for (const a of ['catalog.scan', 'catalog.acknowledge', 'catalog.annotation.set', 'catalog.annotation.remove', 'catalog.settings']) expect(actions).toContain(a);
  });
});
