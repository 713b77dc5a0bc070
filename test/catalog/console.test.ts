// The catalog's console pages through a running service and in chromium: the tree with search, changes acknowledged one and all, annotations with suggestions, scan history, the naming report; the two spec forms answer 422 at the field, need the CSRF token and catalog:write; table and column names carrying markup are shown as text; axe finds nothing serious.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import { ConsoleClient, fieldError } from '../console/support/pages.js';
import { axeViolations, describeViolations, launchBrowser, openPage, screenshot, signIn } from '../console/support/browser.js';
import { createSourceDatabase, FIXTURE_SQL, type SourceDatabase } from './support.js';

const SOURCE = 'catalog-console';
const PAGE = `/dashboard/data-sources/${SOURCE}/catalog`;
const XSS_TABLE = '<script>alert(1)</script>';
const XSS_COLUMN = '"><img src=x onerror=alert(2)>';
const XSS_FIXTURE = `${FIXTURE_SQL}
create table public."${XSS_TABLE}" ("${XSS_COLUMN.replaceAll('"', '""')}" text, email text);`;

let world: World;
let src: SourceDatabase;
let owner: ConsoleClient;
let viewer: ConsoleClient;
let browser: Browser;

async function until<T>(what: string, probe: () => Promise<T | null | undefined>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== null && v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const snapshotVersion = async () => (await world.admin('GET', `/api/data-sources/${SOURCE}/catalog`)).json.snapshot?.version ?? 0;
const openChanges = async () => (await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/changes?status=open`)).json as Array<{ change_id: string; path: string; kind: string }>;

beforeAll(async () => {
  src = await createSourceDatabase(XSS_FIXTURE);
  [world, browser] = await Promise.all([startWorld({ privateSources: [SOURCE] }), launchBrowser()]);
  owner = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
  expect((await world.admin('POST', '/api/admins', { username: 'catviewer', password: 'viewer-password-0003', roles: ['viewer'], must_change_password: false })).status).toBe(201);
  viewer = await ConsoleClient.signIn(world.svc.adminUrl, 'catviewer', 'viewer-password-0003');
  expect((await world.admin('POST', '/api/data-sources', { name: SOURCE, source_id: SOURCE, source_type: 'postgres', connection_config: src.config })).status).toBe(201);
  await until('first snapshot', async () => ((await snapshotVersion()) >= 1 ? true : null));
});

afterAll(async () => {
  await browser?.close();
  await world?.stop();
  await src?.close();
});

describe('catalog page', () => {
  it('shows the tree, suggestions, history, and names with markup as text', async () => {
    const page = await owner.get(PAGE);
    expect(page.status, page.text).toBe(200);
    expect(page.text).toContain('<code>public.users</code>');
    expect(page.text).toContain('<code>&#34;Mixed Case&#34;.&#34;Users&#34;</code>');
    // The suggestion and its one-button confirmation.
    expect(page.text).toMatch(/<code>public\.users\.email<\/code> → <span>email<\/span>/);
    expect(page.text).toMatch(/name="path" value="public\.users\.email"/);
    // Scan history: version 1, by save.
    expect(page.text).toMatch(/<td data-label="Version">1<\/td>/);
    expect(page.text).toContain('<td data-label="Trigger">save</td>');
    // Markup in identifiers is text, in children and in attribute values.
    expect(page.text).not.toContain(XSS_TABLE);
    expect(page.text).not.toContain('<img src=x');
    expect(page.text).toContain('<code>public.&#34;&lt;script>alert(1)&lt;/script>&#34;</code>');
    expect(page.text).toContain('<code>&#34;>&lt;img src=x onerror=alert(2)></code>');
    expect(page.text).toContain('name="path" value="public.&#34;&lt;script>alert(1)&lt;/script>&#34;.email"');
    // Search keeps the matching relations only.
    const searched = await owner.get(`${PAGE}?q=order`);
    expect(searched.text).toContain('<code>sales.orders</code>');
    expect(searched.text).not.toContain('<code>public.users</code>');
    expect(searched.text).toMatch(/id="catalog-q" name="q" type="search" value="order"/);
    expect((await owner.get('/dashboard/data-sources/no-such/catalog')).status).toBe(404);
    expect((await owner.get(`/dashboard/data-sources/${SOURCE}`)).text).toContain(`href="${PAGE}"`);
  });

  it('scans on request and lists the changes; acknowledges one and all through the spec form', async () => {
    await src.sql('alter table public.users add column nickname text; alter table sales.orders add column phone text;');
    const scan = await owner.post(`${PAGE}/scan`, {});
    expect(scan.status, scan.text).toBe(200);
    expect(scan.text).toMatch(/Scan requested at /);
    await until('second snapshot', async () => ((await snapshotVersion()) >= 2 ? true : null));
    const page = await owner.get(PAGE);
    expect(page.text).toContain('<code>public.users.nickname</code>');
    expect(page.text).toContain('<code>sales.orders.phone</code>');
    // phone suggests personal data: redacted until acknowledged.
    expect(page.text).toMatch(/sales\.orders\.phone<\/code><\/td><td data-label="Change"><span>added column<\/span><\/td><td data-label="Protected"><span class="badge bad">redacted until acknowledged/);
    expect(page.text).toMatch(/<td data-label="Version">2<\/td>/);

    const badId = await owner.post(`${PAGE}/changes/acknowledge`, { change_id: 'not-hex' });
    expect(badId.status).toBe(422);
    expect(fieldError(badId.text, 'change_id')).toBe('Must be a change_id (hexadecimal).');
    const unknown = await owner.post(`${PAGE}/changes/acknowledge`, { change_id: 'abcdef' });
    expect(unknown.status).toBe(422);
    expect(fieldError(unknown.text, 'change_id')).toBe('No change with this change_id for the source.');
    expect((await owner.post(`${PAGE}/changes/acknowledge`, { change_id: 'abcdef' }, { accept: 'application/json' })).json.detail[0].loc).toEqual(['body', 'change_id']);

    const open = await openChanges();
    expect(open).toHaveLength(2);
    const one = open.find((c) => c.path === 'sales.orders.phone')!;
    expect((await owner.post(`${PAGE}/changes/acknowledge`, { change_id: one.change_id }, { csrf: false })).status).toBe(403);
    expect((await viewer.post(`${PAGE}/changes/acknowledge`, { change_id: one.change_id })).status).toBe(403);
    const acked = await owner.post(`${PAGE}/changes/acknowledge`, { change_id: one.change_id });
    expect(acked.status).toBe(303);
    expect(acked.headers.get('location')).toBe(`${PAGE}#changes`);
    expect((await openChanges()).map((c) => c.path)).toEqual(['public.users.nickname']);
    const all = await owner.post(`${PAGE}/changes/acknowledge`, { change_id: '' });
    expect(all.status).toBe(303);
    expect(await openChanges()).toEqual([]);
    const after = await owner.get(PAGE);
    expect(after.text).toContain('No open changes.');
    expect(after.text).toMatch(/Acknowledged \(latest 2\)/);
  });

  it('classifies through the spec form with every problem at its field', async () => {
    const missing = await owner.post(`${PAGE}/annotations`, { classification: 'email' });
    expect(missing.status).toBe(422);
    expect(fieldError(missing.text, 'path')).toBe('This field is required.');
    const notAColumn = await owner.post(`${PAGE}/annotations`, { path: 'public.users.nope', classification: 'email' });
    expect(notAColumn.status).toBe(422);
    expect(fieldError(notAColumn.text, 'path')).toBe('Public.users has no column nope in the catalog.');
    const badTag = await owner.post(`${PAGE}/annotations`, { path: 'public.users.email', classification: 'Not A Tag' });
    expect(badTag.status).toBe(422);
    expect(fieldError(badTag.text, 'classification')).toMatch(/^Must be a tag/);
    // The entered values stay in the form, escaped.
    expect(badTag.text).toMatch(/id="f-path" name="path"[^>]* value="public\.users\.email"/);
    const xss = await owner.post(`${PAGE}/annotations`, { path: `public."${XSS_TABLE}"."${XSS_COLUMN.replaceAll('"', '""')}"`, classification: 'secret' });
    expect(xss.status, xss.text).toBe(303);
    expect((await viewer.post(`${PAGE}/annotations`, { path: 'public.users.email', classification: 'email' })).status).toBe(403);
    expect((await owner.post(`${PAGE}/annotations`, { path: 'public.users.email', classification: 'email' }, { csrf: false })).status).toBe(403);
    const ok = await owner.post(`${PAGE}/annotations`, { path: 'Public.USERS.Email', classification: 'email' });
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe(`${PAGE}#annotations`);
    const page = await owner.get(PAGE);
    expect(page.text).toMatch(/<td data-label="Path"><code>public\.users\.email<\/code><\/td><td data-label="Classification">email<\/td>/);
    // A confirmed classification is no longer offered as a suggestion.
    expect(page.text).not.toMatch(/<code>public\.users\.email<\/code> → /);
    expect(page.text).not.toContain('<img src=x');
    const removed = await owner.post(`${PAGE}/annotations`, { path: 'public.users.email', classification: '' });
    expect(removed.status).toBe(303);
    expect((await world.admin('GET', `/api/data-sources/${SOURCE}/catalog/annotations`)).json.map((a: { path: string }) => a.path)).toEqual([`public."${XSS_TABLE}"."${XSS_COLUMN.replaceAll('"', '""')}"`]);
  });

  it('shows a viewer the page without forms', async () => {
    const page = await viewer.get(PAGE);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<code>public.users</code>');
    expect(page.text).not.toMatch(/Save classification|Scan now|>Acknowledge</);
    expect((await viewer.post(`${PAGE}/scan`, {})).status).toBe(403);
  });
});

describe('naming report page', () => {
  it('lists the findings of a policy naming an ambiguous table', async () => {
    await src.sql('create table sales.users (id int)');
    await owner.post(`${PAGE}/scan`, {});
    await until('third snapshot', async () => ((await snapshotVersion()) >= 3 ? true : null));
    const policy = await world.admin('POST', '/api/policies', { name: '<b>deny-users</b>', priority: 10, conditions: { tables: ['users'] }, actions: { effect: 'deny' } });
    expect(policy.status, JSON.stringify(policy.json)).toBe(201);
    const page = await owner.get('/dashboard/catalog/naming-report');
    expect(page.status).toBe(200);
    expect(page.text).toContain('ambiguous_unqualified');
    expect(page.text).toContain('public.users, sales.users');
    expect(page.text).toContain('policy &lt;b>deny-users&lt;/b> (#');
    expect(page.text).not.toContain('<b>deny-users');
    expect((await viewer.get('/dashboard/catalog/naming-report')).status).toBe(200);
  });
});

describe('catalog pages in chromium', () => {
  it('have no serious or critical axe violations and run no injected script', async () => {
    const w = await openPage(browser);
    await signIn(w.page, world.svc.adminUrl, 'admin', OWNER_PASSWORD);
    for (const [name, path] of [
      ['catalog', PAGE],
      ['catalog-search', `${PAGE}?q=users`],
      ['naming-report', '/dashboard/catalog/naming-report'],
    ] as const) {
      await w.page.goto(world.svc.adminUrl + path);
      const v = await axeViolations(w.page);
      expect(v, `${name}:\n${describeViolations(v)}`).toEqual([]);
      await screenshot(w.page, name);
    }
    // The annotation form with an error at its field, submitted like a person would.
    await w.page.goto(world.svc.adminUrl + PAGE);
    await w.page.getByLabel(/^Path/).fill('public.users.nope');
    await w.page.getByLabel(/^Classification/).fill('email');
    await w.page.getByRole('button', { name: 'Save classification' }).click();
    await w.page.waitForLoadState();
    expect(await w.page.locator('#f-path-error').textContent()).toBe('Public.users has no column nope in the catalog.');
    const v = await axeViolations(w.page);
    expect(v, `annotation error:\n${describeViolations(v)}`).toEqual([]);
    // The acknowledge-all form, then the page again.
    await w.page.getByLabel(/^Change id/).fill('');
    await Promise.all([w.page.waitForURL((u) => u.pathname === PAGE), w.page.getByRole('button', { name: /^Acknowledge/ }).last().click()]);
    expect(await w.page.locator('h1').textContent()).toBe(`Catalog of ${SOURCE}`);
    expect(w.dialogs).toEqual([]);
    expect(w.pageErrors).toEqual([]);
    expect(w.consoleErrors, w.consoleErrors.join('\n')).toEqual([]);
    await w.context.close();
  });
});
