// The alert console pages: POST /dashboard/alerts/create and /dashboard/alerts/dry-run with spec §2's form fields and defaults (field errors at 422, CSRF required), the list with state, edit, history with the audit link, and the same flows in chromium with axe.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import { ConsoleClient, fieldError } from '../console/support/pages.js';
import { axeViolations, describeViolations, launchBrowser, openPage, screenshot, signIn } from '../console/support/browser.js';

let world: World;
let client: ConsoleClient;
let browser: Browser;

beforeAll(async () => {
  [world, browser] = await Promise.all([startWorld({ env: { SERVICE_WORKER__ALERT_INTERVAL_SECONDS: '3600' } }), launchBrowser()]);
  client = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
});

afterAll(async () => {
  await browser?.close();
  await world?.stop();
});

const rules = async () => (await world.admin('GET', '/api/alerts')).json as Array<Record<string, unknown>>;

describe('form endpoints (HTTP)', () => {
  it('POST /dashboard/alerts/create applies the spec defaults to blank fields and redirects to the rule', async () => {
    const res = await client.post('/dashboard/alerts/create', { name: 'form-rule', condition_type: 'denial_rate', threshold: '0.25', comparator: '', window_seconds: '', identity_id: '', source_id: '', notification_channel: '', notification_target: '', description: '' });
    expect(res.status, res.text).toBe(303);
    const created = (await rules()).find((r) => r.name === 'form-rule')!;
    expect(res.headers.get('location')).toBe(`/dashboard/alerts/${created.id}`);
    expect(created).toMatchObject({ condition_type: 'denial_rate', threshold: 0.25, comparator: '>', window_seconds: 300, notification_channel: 'log', identity_id: null, source_id: null });
    expect(world.audits.some((e) => e.action === 'alert.create' && e.target?.id === created.id)).toBe(true);
  });

  it('shows field errors with status 422 and keeps the values; JSON callers get the spec shape', async () => {
    const res = await client.post('/dashboard/alerts/create', { name: 'bad', condition_type: 'cpu', threshold: 'x', comparator: '!=', window_seconds: '5' });
    expect(res.status).toBe(422);
    for (const f of ['condition_type', 'threshold', 'comparator', 'window_seconds']) expect(fieldError(res.text, f), f).not.toBeNull();
    const json = await client.post('/dashboard/alerts/create', { name: 'bad', condition_type: 'error_rate' }, { accept: 'application/json' });
    expect(json.status).toBe(422);
    expect(json.json.detail.map((d: { loc: unknown[] }) => d.loc)).toContainEqual(['body', 'threshold']);
    expect((await client.post('/dashboard/alerts/create', { name: 'nocsrf', condition_type: 'error_rate', threshold: '0.1' }, { csrf: false })).status).toBe(403);
    expect((await rules()).some((r) => r.name === 'bad' || r.name === 'nocsrf')).toBe(false);
  });

  it('a webhook rule created by form shows its secret once', async () => {
    const res = await client.post('/dashboard/alerts/create', { name: 'form-hook', condition_type: 'request_count', threshold: '10', notification_channel: 'webhook', notification_target: 'https://hooks.example.com/x' });
    expect(res.status).toBe(200);
    const secret = /whsec_[A-Za-z0-9_-]{43}/.exec(res.text)?.[0];
    expect(secret).toBeDefined();
    const id = (await rules()).find((r) => r.name === 'form-hook')!.id;
    expect((await client.get(`/dashboard/alerts/${id}`)).text).not.toContain(secret!);
  });

  it('POST /dashboard/alerts/dry-run with an empty form uses the spec defaults and stores nothing', async () => {
    const before = (await rules()).length;
    const res = await client.post('/dashboard/alerts/dry-run', {});
    expect(res.status, res.text).toBe(200);
    expect(res.text).toMatch(/error_rate (&gt;|>) 0\.1 over 300 s/);
    expect(res.text).toContain('<svg class="sparkline"');
    expect((await rules()).length).toBe(before);
    const bad = await client.post('/dashboard/alerts/dry-run', { window_seconds: '10' });
    expect(bad.status).toBe(422);
    expect(fieldError(bad.text, 'window_seconds')).not.toBeNull();
  });

  it('edit, disable and delete by form; the detail page links to the audit of the scope', async () => {
    const id = (await rules()).find((r) => r.name === 'form-rule')!.id;
    const edit = await client.get(`/dashboard/alerts/${id}/edit`);
    expect(edit.status).toBe(200);
    const saved = await client.post(`/dashboard/alerts/${id}/update`, { name: 'form-rule', condition_type: 'denial_rate', threshold: '0.5', comparator: '>=', window_seconds: '600', source_id: '', identity_id: '' });
    expect(saved.status, saved.text).toBe(303);
    expect((await rules()).find((r) => r.id === id)).toMatchObject({ threshold: 0.5, comparator: '>=', window_seconds: 600 });
    expect((await client.post(`/dashboard/alerts/${id}/disable`, {})).status).toBe(303);
    expect((await rules()).find((r) => r.id === id)!.enabled).toBe(false);
    const page = await client.get(`/dashboard/alerts/${id}`);
    expect(page.text).toMatch(/href="\/(api|dashboard)\/audit\?from=/);
    expect((await client.post(`/dashboard/alerts/${id}/delete`, {})).status).toBe(303);
    expect((await rules()).some((r) => r.id === id)).toBe(false);
  });
});

describe('in chromium', () => {
  it('creates a rule through the form, sees it listed with its state, dry-runs, all without axe violations', async () => {
    const w = await openPage(browser);
    await signIn(w.page, world.svc.adminUrl, 'admin', OWNER_PASSWORD);
    await w.page.goto(`${world.svc.adminUrl}/dashboard/alerts`);
    expect(await w.page.locator('nav[aria-label="Main"] a[aria-current="page"]').textContent()).toBe('Alerts');
    await w.page.getByRole('link', { name: 'New rule' }).click();
    await w.page.waitForLoadState();
    let v = await axeViolations(w.page);
    expect(v, describeViolations(v)).toEqual([]);
    await w.page.getByLabel(/^Name/).fill('browser-rule');
    await w.page.getByLabel(/^Condition/).selectOption('error_rate');
    await w.page.getByLabel(/^Threshold/).fill('0.3');
    await Promise.all([w.page.waitForURL(/\/dashboard\/alerts\/(\d+|create)$/), w.page.getByRole('button', { name: 'Create rule' }).click()]);
    expect(w.page.url(), await w.page.locator('main').innerText()).toMatch(/\/dashboard\/alerts\/\d+$/);
    expect(await w.page.locator('h1').textContent()).toBe('Alert rule browser-rule');
    v = await axeViolations(w.page);
    expect(v, describeViolations(v)).toEqual([]);
    await w.page.goto(`${world.svc.adminUrl}/dashboard/alerts`);
    const row = w.page.locator('tr', { hasText: 'browser-rule' });
    expect(await row.locator('.badge').textContent()).toBe('ok');
    await screenshot(w.page, 'alerts-list');
    await w.page.getByRole('link', { name: 'Dry run' }).click();
    await w.page.waitForLoadState();
    await w.page.getByRole('button', { name: 'Evaluate' }).click();
    await w.page.waitForLoadState();
    expect(await w.page.locator('#dry-run-result').textContent()).toBe('Result');
    v = await axeViolations(w.page);
    expect(v, describeViolations(v)).toEqual([]);
    await screenshot(w.page, 'alerts-dry-run');
    expect(w.dialogs).toEqual([]);
    expect(w.consoleErrors, w.consoleErrors.join('\n')).toEqual([]);
    expect(w.pageErrors).toEqual([]);
  });
});
