// The console's dry-run view of managed privileges, through a running service and in chromium: the state and the pending plan of a managed source (a table made by hand shows up as grants to come, its name with markup as text), nothing pending after a reconciliation, 404 for an unknown source and a notice for one without managed privileges, a read-only admin role sees it, linked from the data source page; axe finds nothing serious.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER_PASSWORD } from '../support/world.js';
import { ConsoleClient } from '../console/support/pages.js';
import { axeViolations, describeViolations, launchBrowser, openPage, screenshot, signIn } from '../console/support/browser.js';
import { startManagedWorld, waitForPrivileges, type ManagedWorld } from './fixture.js';
import { waitFor } from '../support/wait.js';

const MARKUP_TABLE = '<img src=x onerror=alert(1)>';
let mw: ManagedWorld;
let owner: ConsoleClient;
let browser: Browser;
const page = () => `/dashboard/data-sources/${mw.sourceId}/privileges`;

beforeAll(async () => {
  [mw, browser] = await Promise.all([startManagedWorld({ sourceId: 'mgdconsole' }), launchBrowser()]);
  await waitForPrivileges(mw, (s) => s.status === 'ok', 'the first reconciliation');
  await mw.world.agent('console-reader', [{ source_id: mw.sourceId, role_key: 'reader' }]);
  owner = await ConsoleClient.signIn(mw.world.svc.adminUrl, 'admin', OWNER_PASSWORD);
  // The new grant sets off reconciliations of its own (one per event it publishes, coalesced only within the debounce);
  // the test's table is made only once they have all applied: nothing pending, and the last reconciliation's time
  // unchanged for a second. Otherwise a late one grants the table before the page is read.
  let settled = '';
  await waitFor(
    async () => {
      const text = (await owner.get(page())).text;
      const last = /Last reconciliation here<\/dt><dd><time datetime="([^"]+)"/.exec(text)?.[1] ?? '';
      const quiet = text.includes('Nothing to do') && last !== '' && last === settled;
      settled = last;
      return quiet;
    },
    20_000,
    'the grant\'s reconciliations',
    1_000,
  );
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await mw?.stop();
});

describe('managed privileges page', () => {
  it('shows the pending plan of a table made by hand, its name with markup as text, and nothing pending after a reconciliation', async () => {
    await mw.asAdmin((c) => c.query(`create table public."${MARKUP_TABLE}" (id int)`));
    const before = await owner.get(page());
    expect(before.status, before.text).toBe(200);
    expect(before.text).toContain('Pending plan');
    expect(before.text).toMatch(/<td>Privileges to grant<\/td>\s*<td>[1-9]\d*<\/td>/);
    expect(before.text).toContain('&lt;img src=x onerror=alert(1)>');
    expect(before.text).not.toContain('<img src=x');
    // Still pending: the page applied nothing.
    expect((await mw.direct((d) => d.query('select has_table_privilege($1, $2, $3) as ok', [`${mw.prefix}r_reader`, `public."${MARKUP_TABLE}"`, 'select']))).rows[0].ok).toBe(false);

    const r = await mw.world.admin('POST', `/api/data-sources/${mw.sourceId}/privileges/reconcile`);
    expect(r.status, r.text).toBeLessThan(300);
    const after = await owner.get(page());
    expect(after.text).toContain('Nothing to do');
    expect(after.text).toContain(`${mw.prefix}r_reader`);
    expect(after.text).toMatch(/<a href="\/dashboard\/access-control\/identities\/\d+">#\d+<\/a>/);
  });

  it('is linked from the data source page; 404 for an unknown source; a read-only admin role sees it', async () => {
    expect((await owner.get(`/dashboard/data-sources/${mw.sourceId}`)).text).toContain(`href="/dashboard/data-sources/${mw.sourceId}/privileges"`);
    expect((await owner.get('/dashboard/data-sources/no-such-source/privileges')).status).toBe(404);
    // A source without managed privileges: the page says so (no plan, no dry run against it).
    await mw.world.httpSource('plainhttp', 'http://127.0.0.1:9/');
    const plain = await owner.get('/dashboard/data-sources/plainhttp/privileges');
    expect(plain.status).toBe(200);
    expect(plain.text).toContain('does not use managed privileges');
    expect(plain.text).not.toContain('Pending plan');
    expect((await mw.world.admin('POST', '/api/admins', { username: 'privauditor', password: 'auditor-password-0007', roles: ['auditor'], must_change_password: false })).status).toBe(201);
    const auditor = await ConsoleClient.signIn(mw.world.svc.adminUrl, 'privauditor', 'auditor-password-0007');
    // Every admin role reads sources (docs/admin-roles.md); the dry run changes nothing, so a read-only role sees it too.
    const read = await auditor.get(page());
    expect(read.status).toBe(200);
    expect(read.text).toContain('Pending plan');
  });

  it('passes axe in chromium and runs no script from the names it shows', async () => {
    await mw.asAdmin((c) => c.query(`create table public."${MARKUP_TABLE}2" (id int)`));
    const w = await openPage(browser);
    try {
      await signIn(w.page, mw.world.svc.adminUrl, 'admin', OWNER_PASSWORD);
      await w.page.goto(`${mw.world.svc.adminUrl}${page()}`);
      await w.page.getByRole('heading', { name: 'Pending plan' }).waitFor();
      const violations = await axeViolations(w.page);
      expect(violations, describeViolations(violations)).toEqual([]);
      await screenshot(w.page, 'privileges-plan');
      expect(w.dialogs).toEqual([]);
      expect(w.pageErrors).toEqual([]);
    } finally {
      await w.context.close();
    }
  }, 60_000);
});
