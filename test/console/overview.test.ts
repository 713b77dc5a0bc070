// The overview: the last hour's and day's requests, denials, error rate and cache hit ratio agree with the raw audit log, before and after the entries are rolled up; the newest pending approvals open in one click; the chart draws under the CSP in chromium, axe-clean.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rollUp } from '../../src/alerts/figures.js';
import { alertsDb } from '../../src/alerts/routes.js';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import { startRecordingUpstream, sendJson, type RecordingUpstream } from '../gateway/proxy/support.js';
import { ConsoleClient } from './support/pages.js';
import { axeViolations, describeViolations, launchBrowser, openPage, screenshot, signIn } from './support/browser.js';

let world: World;
let upstream: RecordingUpstream;
let owner: ConsoleClient;
let browser: Browser;
const approvalIds: number[] = [];

interface Entry {
  channel: string;
  status: number;
  decision: string;
  cache: string | null;
}

async function agentEntries(n: number): Promise<Entry[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const items = (await world.admin('GET', '/api/audit?limit=500&channel=http')).json.items as Entry[];
    if (items.length >= n || Date.now() > deadline) return items;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The four figures of one period as the page shows them. */
function shown(html: string, label: string): string[] {
  const section = new RegExp(`<section aria-label="${label}">(.*?)</section>`, 's').exec(html)![1]!;
  return [...section.matchAll(/<strong>([^<]*)<\/strong>/g)].map((m) => m[1]!);
}

function expected(entries: Entry[]): string[] {
  const pct = (a: number, b: number) => (b === 0 ? '—' : `${((a / b) * 100).toFixed(1)} %`);
  const errors = entries.filter((e) => e.status >= 500).length;
  const hits = entries.filter((e) => e.cache === 'hit').length;
  const lookups = entries.filter((e) => e.cache === 'hit' || e.cache === 'miss').length;
  return [String(entries.length), String(entries.filter((e) => e.decision === 'deny' && e.status === 403).length), pct(errors, entries.length), pct(hits, lookups)];
}

beforeAll(async () => {
  upstream = await startRecordingUpstream({
    '/base/orders': (_req, res) => sendJson(res, 200, { ok: true }),
    '/base/broken': (_req, res) => sendJson(res, 502, { down: true }),
  });
  [world, browser] = await Promise.all([startWorld({ privateSources: ['up'] }), launchBrowser()]);
  await world.httpSource('up', `${upstream.base}/base/`);
  const writer = await world.agent('overview-writer', [{ source_id: 'up', role_key: 'writer' }]);
  const reader = await world.agent('overview-reader', [{ source_id: 'up', role_key: 'reader' }]);
  await world.policy({ name: 'writes need approval', conditions: { source_ids: ['up'], methods: ['POST'] }, actions: { effect: 'require_approval' } });
  for (let i = 0; i < 4; i++) expect((await world.proxy(reader.key, 'GET', '/proxy/up/orders')).status).toBe(200);
  expect((await world.proxy(reader.key, 'GET', '/proxy/up/broken')).status).toBe(502);
  expect((await world.proxy(reader.key, 'POST', '/proxy/up/orders', { body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(403);
  for (const note of ['first', 'second']) {
    const res = await world.proxy(writer.key, 'POST', '/proxy/up/orders', { body: JSON.stringify({ note }), headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(202);
    approvalIds.push(res.json.approval_id as number);
  }
  expect(await agentEntries(8)).toHaveLength(8);
  owner = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
});

afterAll(async () => {
  await browser?.close();
  await world?.stop();
  await upstream?.close();
});

describe('overview', () => {
  it('counts the last hour and day as the raw audit log does, before and after the rollup', async () => {
    const entries = await agentEntries(8);
    const want = expected(entries);
    expect(want[1]).toBe('1');
    expect(want[2]).toBe('12.5 %');
    const page = await owner.get('/dashboard/overview');
    expect(page.status).toBe(200);
    expect(shown(page.text, 'Last hour')).toEqual(want);
    expect(shown(page.text, 'Last 24 hours')).toEqual(want);
    // Roll everything up (as the worker's evaluator does once entries settle): the figures come from the rollups now.
    const db = alertsDb(world.svc.running.services);
    await rollUp(db, Date.now() + 60_000);
    const rolled = await owner.get('/dashboard/overview');
    expect(shown(rolled.text, 'Last hour')).toEqual(want);
    expect(shown(rolled.text, 'Last 24 hours')).toEqual(want);
    expect(rolled.text).toContain('<strong>2</strong> approvals waiting');
  });

  it('lists the newest pending approvals, newest first, each one click from its page', async () => {
    const page = await owner.get('/dashboard/overview');
    const opens = [...page.text.matchAll(/<a href="\/dashboard\/approvals\/(\d+)">Open #\d+<\/a>/g)].map((m) => Number(m[1]));
    expect(opens).toEqual([...approvalIds].reverse());
    const detail = await owner.get(`/dashboard/approvals/${opens[0]}`);
    expect(detail.status).toBe(200);
    expect(detail.text).toContain('Approve…');
  });

  it('draws the chart in chromium under the CSP, with no serious or critical axe violations', async () => {
    for (const colorScheme of ['light', 'dark'] as const) {
      const w = await openPage(browser, { colorScheme });
      await signIn(w.page, world.svc.adminUrl, 'admin', OWNER_PASSWORD);
      await w.page.goto(`${world.svc.adminUrl}/dashboard/overview`);
      await w.page.locator('.chart.chart-drawn canvas').waitFor();
      const violations = await axeViolations(w.page);
      expect(violations, describeViolations(violations)).toEqual([]);
      await screenshot(w.page, `overview-figures-${colorScheme}`);
      expect(w.consoleErrors).toEqual([]);
      expect(w.pageErrors).toEqual([]);
      await w.context.close();
    }
  });
});
