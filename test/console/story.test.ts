// The operator's story in Debian chromium against a real Gatehouse and a real upstream: built-in password and forced change; a data source created and its connection tested with the form; an identity with a generated key; a grant and an approval policy through the forms; a write through /proxy with that key queues; approved in the inbox and executed; its audit entries found in the explorer and exported; the policy dry run; the theme switched. Screenshots of each page in test-artifacts/console/, axe on the overview and audit pages.
import { readFile } from 'node:fs/promises';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_INITIAL_PASSWORD } from '../../src/admin/auth/passwords.js';
import { startTestService, type TestService } from '../support/service.js';
import { startRecordingUpstream, sendJson, type RecordingUpstream } from '../gateway/proxy/support.js';
import { axeViolations, describeViolations, launchBrowser, openPage, screenshot, signIn, type WatchedPage } from './support/browser.js';

const NEW_PASSWORD = 'story-owner-password-2026';

let svc: TestService;
let upstream: RecordingUpstream;
let browser: Browser;

beforeAll(async () => {
  upstream = await startRecordingUpstream({
    '/base/': (_req, res) => sendJson(res, 200, { service: 'orders' }),
    '/base/orders': (_req, res) => sendJson(res, 201, { id: 7 }),
  });
  [svc, browser] = await Promise.all([startTestService({ env: { SERVICE_GATEWAY__EGRESS__ALLOW_PRIVATE_SOURCES: 'orders' } }), launchBrowser()]);
});

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
  await upstream?.close();
});

async function accessible(w: WatchedPage, name: string): Promise<void> {
  const violations = await axeViolations(w.page);
  expect(violations, `${name}:\n${describeViolations(violations)}`).toEqual([]);
}

async function submit(page: Page, button: string): Promise<void> {
  await Promise.all([page.waitForLoadState('load'), page.getByRole('button', { name: button, exact: true }).click()]);
  await page.waitForLoadState('load');
}

describe('the operator story in chromium', () => {
  it('runs from first sign-in to an exported audit trail', { timeout: 120_000 }, async () => {
    const w = await openPage(browser);
    const page = w.page;
    const admin = svc.adminUrl;

    // 1. Sign in with the built-in password; the change is forced before anything else.
    await signIn(page, admin, 'admin', DEFAULT_INITIAL_PASSWORD);
    expect(await page.locator('h1').textContent()).toBe('Change password');
    await page.getByLabel('Current password').fill(DEFAULT_INITIAL_PASSWORD);
    await page.getByLabel(/^New password/).fill(NEW_PASSWORD);
    await page.getByLabel('Repeat the new password').fill(NEW_PASSWORD);
    await Promise.all([page.waitForURL(`${admin}/dashboard/overview`), page.getByRole('button', { name: 'Change password' }).click()]);
    await page.locator('.chart.chart-drawn canvas').waitFor();
    await accessible(w, 'overview');
    await screenshot(page, 'story-01-overview');

    // 2. A data source with the form; its connection tested first (nothing stored), then created.
    await page.goto(`${admin}/dashboard/data-sources/new`);
    await page.locator('#f-name').fill('Orders API');
    await page.getByLabel('Source id').fill('orders');
    await page.locator('#f-source_type').selectOption('http');
    await page.getByLabel('Base URL').fill(`${upstream.base}/base/`);
    await page.getByRole('button', { name: 'Test connection' }).click();
    await expect.poll(() => page.locator('#test-result').textContent()).toMatch(/Connection works \(\d+ ms\)\. Nothing was stored\./);
    await screenshot(page, 'story-02-data-source-test');
    await submit(page, 'Create data source');
    expect(await page.locator('h1').textContent()).toContain('Orders API');
    await screenshot(page, 'story-03-data-source');

    // 3. An identity with a generated key, shown once; then a grant of the source's writer role.
    await page.goto(`${admin}/dashboard/access-control/identities/new`);
    await page.locator('#f-name').fill('story-agent');
    await submit(page, 'Create identity');
    const key = (await page.locator('#new-key').textContent())!.trim();
    expect(key.length).toBeGreaterThan(20);
    await screenshot(page, 'story-04-identity-key');
    await page.goto(`${admin}/dashboard/access-control/identities`);
    await Promise.all([page.waitForLoadState('load'), page.getByRole('link', { name: 'story-agent' }).click()]);
    const identityId = /\/identities\/(\d+)$/.exec(page.url())![1]!;
    await page.locator('#f-source_id').selectOption('orders');
    await page.locator('#f-role_key').fill('writer');
    await submit(page, 'Grant');
    expect(await page.locator('main').textContent()).toContain('writer');

    // 4. A policy with the form: writes to the source wait for a person.
    await page.goto(`${admin}/dashboard/policies/new`);
    await page.locator('#f-name').fill('orders writes need approval');
    await page.getByLabel('Sources').fill('orders');
    await page.getByLabel('More conditions (JSON object)').fill('{"methods": ["POST"]}');
    await page.getByLabel('Effect').selectOption('require_approval');
    await submit(page, 'Create policy');
    expect(await page.locator('main').textContent()).toContain('orders writes need approval');
    await screenshot(page, 'story-05-policy');

    // 5. The agent writes through /proxy with its key (a plain HTTP client, as an agent would): the write queues.
    let queued: { status: number; body: { approval_id?: number; approval_state?: string } } = { status: 0, body: {} };
    await expect
      .poll(async () => {
        const res = await fetch(`${svc.gatewayUrl}/proxy/orders/orders`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"item":"tea"}' });
        queued = { status: res.status, body: (await res.json()) as typeof queued.body };
        return queued.status;
      }, { timeout: 10_000 })
      .toBe(202);
    expect(queued.body.approval_state).toBe('pending');
    const approvalId = queued.body.approval_id!;
    expect(upstream.received.filter((r) => r.method === 'POST')).toHaveLength(0);

    // 6. Approved in the inbox after the confirmation step, and executed once.
    await page.goto(`${admin}/dashboard/approvals`);
    await screenshot(page, 'story-06-inbox');
    await Promise.all([page.waitForLoadState('load'), page.getByRole('link', { name: `#${approvalId}`, exact: true }).click()]);
    await Promise.all([page.waitForLoadState('load'), page.getByRole('link', { name: 'Approve…' }).click()]);
    await submit(page, 'Yes, approve and execute');
    expect(await page.locator('dl.props').textContent()).toContain('executed');
    expect(upstream.received.filter((r) => r.method === 'POST' && r.path === '/base/orders')).toHaveLength(1);
    await screenshot(page, 'story-07-approval-executed');

    // 7. Its audit entries in the explorer: filtered by the identity and the approval through the form.
    await page.goto(`${admin}/dashboard/audit`);
    await page.getByLabel('Identity id').fill(identityId);
    await page.getByLabel('Channel').selectOption('http');
    await page.getByLabel('Approval id').fill(String(approvalId));
    await expect
      .poll(async () => {
        await submit(page, 'Search');
        return page.locator('table.responsive tbody tr').count();
      }, { timeout: 10_000 })
      .toBeGreaterThanOrEqual(1);
    const rows = await page.locator('table.responsive tbody tr').allTextContents();
    expect(rows.some((r) => /require_approval/.test(r) && /202/.test(r) && /POST \/orders/.test(r))).toBe(true);
    await accessible(w, 'audit explorer');
    await screenshot(page, 'story-08-audit-explorer');
    await Promise.all([page.waitForLoadState('load'), page.getByRole('link', { name: /^View entry / }).first().click()]);
    expect(await page.locator('h2', { hasText: 'Decision trace' }).count()).toBe(1);
    expect(await page.locator('main').textContent()).toContain(`#${approvalId}`);
    await accessible(w, 'audit entry');
    await screenshot(page, 'story-09-audit-entry');

    // 8. Exported as the explorer filtered them: CSV and NDJSON downloads.
    await page.goBack();
    const [csvDownload] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Export CSV' }).click()]);
    const csv = await readFile((await csvDownload.path())!, 'utf8');
    const csvRows = csv.trim().split('\r\n');
    expect(csvRows[0]).toMatch(/^id,ts,request_id,channel,identity_id/);
    expect(csvRows.length).toBe(rows.length + 1);
    expect(csvRows.slice(1).every((r) => r.includes(`,http,${identityId},`))).toBe(true);
    const [ndDownload] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Export NDJSON' }).click()]);
    const lines = (await readFile((await ndDownload.path())!, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { approval_id: number; identity_id: number });
    expect(lines).toHaveLength(rows.length);
    expect(lines.every((l) => l.approval_id === approvalId && l.identity_id === Number(identityId))).toBe(true);

    // 9. The policy dry run with the form: the same write would wait for approval, with the deciding policy named.
    await page.goto(`${admin}/dashboard/policies/dry-run`);
    await page.locator('#f-identity_id').selectOption(identityId);
    await page.locator('#f-source_id').selectOption('orders');
    await page.getByLabel('HTTP method').selectOption('POST');
    await page.getByLabel('HTTP path').fill('/orders');
    await submit(page, 'Dry run');
    expect(await page.locator('#dry-run-result').textContent()).toContain('require_approval');
    await screenshot(page, 'story-10-policy-dry-run');

    // 10. The theme, switched and kept.
    await page.goto(`${admin}/dashboard/overview`);
    await page.getByLabel('Theme').selectOption('dark');
    await submit(page, 'Apply');
    expect(await page.getAttribute('html', 'data-theme')).toBe('dark');
    await page.locator('.chart.chart-drawn canvas').waitFor();
    await accessible(w, 'overview dark');
    await screenshot(page, 'story-11-overview-dark');
    await page.goto(`${admin}/dashboard/audit`);
    expect(await page.getAttribute('html', 'data-theme')).toBe('dark');
    await accessible(w, 'audit explorer dark');
    await screenshot(page, 'story-12-audit-dark');

    expect(w.dialogs).toEqual([]);
    expect(w.pageErrors).toEqual([]);
    expect(w.consoleErrors, w.consoleErrors.join('\n')).toEqual([]);
    await w.context.close();
  });
});
