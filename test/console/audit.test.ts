// The audit explorer over HTTP: real requests through /proxy fill the log; every filter narrows the page, keyset pages cover the matches exactly once, the detail shows the decision trace, exports stream the filter as CSV (formulas neutralized) and NDJSON, invalid filters answer 422 at the field, and only audit readers get in. The alerts page links into it pre-filtered.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import { startRecordingUpstream, sendJson, type RecordingUpstream } from '../gateway/proxy/support.js';
import { ConsoleClient, fieldError } from './support/pages.js';
import { newAuditId } from '../../src/audit/entry.js';

let world: World;
let upstream: RecordingUpstream;
let owner: ConsoleClient;
let auditor: ConsoleClient;
let viewer: ConsoleClient;
let agent: { id: number; key: string };
let other: { id: number; key: string };
const requestIds: Record<string, string> = {};

async function waitForEntries(query: string, n: number): Promise<Array<Record<string, unknown>>> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const page = await world.admin('GET', `/api/audit?limit=500&${query}`);
    const items = page.json.items as Array<Record<string, unknown>>;
    if (items.length >= n || Date.now() > deadline) return items;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The entry ids of one explorer page, in page order. */
function entryIds(html: string): string[] {
  return [...html.matchAll(/href="\/dashboard\/audit\/([0-9a-f-]{36})"/g)].map((m) => m[1]!);
}

function nextLink(html: string): string | null {
  const m = /<a href="([^"]+)" rel="next">/.exec(html);
  return m ? m[1]!.replace(/&amp;/g, '&') : null;
}

beforeAll(async () => {
  upstream = await startRecordingUpstream({
    '/base/orders': (_req, res) => sendJson(res, 200, { ok: true }),
    '/base/broken': (_req, res) => sendJson(res, 503, { down: true }),
  });
  world = await startWorld({ privateSources: ['up'] });
  await world.httpSource('up', `${upstream.base}/base/`);
  agent = await world.agent('audit-agent', [{ source_id: 'up', role_key: 'writer' }]);
  other = await world.agent('other agent', [{ source_id: 'up', role_key: 'reader' }]);
  await world.policy({ name: 'writes need approval', conditions: { source_ids: ['up'], methods: ['POST'] }, actions: { effect: 'require_approval' } });
  const send = async (name: string, key: string, method: string, path: string, expected: number) => {
    const res = await world.proxy(key, method, path, method === 'POST' ? { body: '{"a":1}', headers: { 'content-type': 'application/json' } } : undefined);
    expect(res.status, `${name}: ${res.text}`).toBe(expected);
    requestIds[name] = res.headers.get('x-request-id')!;
  };
  for (let i = 0; i < 5; i++) await send(`read${i}`, agent.key, 'GET', `/proxy/up/orders?i=${i}`, 200);
  await send('queued', agent.key, 'POST', '/proxy/up/orders', 202);
  await send('denied', other.key, 'POST', '/proxy/up/orders', 403);
  await send('broken', other.key, 'GET', '/proxy/up/broken', 503);
  expect((await waitForEntries('channel=http', 8)).length).toBe(8);
  owner = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
  for (const [name, role] of [['auditor7', 'auditor'], ['viewer7', 'viewer']] as const) {
    expect((await world.admin('POST', '/api/admins', { username: name, password: `${name}-password-00007`, roles: [role], must_change_password: false })).status).toBe(201);
  }
  auditor = await ConsoleClient.signIn(world.svc.adminUrl, 'auditor7', 'auditor7-password-00007');
  viewer = await ConsoleClient.signIn(world.svc.adminUrl, 'viewer7', 'viewer7-password-00007');
});

afterAll(async () => {
  await world?.stop();
  await upstream?.close();
});

describe('audit explorer', () => {
  it('lists the newest entries first, names identities, and is in the navigation of audit readers only', async () => {
    const page = await owner.get('/dashboard/audit?channel=http');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    const ids = entryIds(page.text);
    expect(ids).toHaveLength(8);
    // uuidv7 ids sort by creation: newest first means descending.
    expect([...ids].sort().reverse()).toEqual(ids);
    expect(page.text).toContain(`#${other.id}<span> other agent</span>`);
    expect(page.text).toContain('href="/dashboard/audit" aria-current="page"');
    expect((await auditor.get('/dashboard/audit')).status).toBe(200);
    const refused = await viewer.get('/dashboard/audit');
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('audit:read');
    expect((await viewer.get('/dashboard/overview')).text).not.toContain('href="/dashboard/audit"');
    expect((await viewer.get(`/dashboard/audit/${ids[0]}`)).status).toBe(403);
    expect((await viewer.get('/dashboard/audit/export?format=csv')).status).toBe(403);
  });

  it('narrows by each filter', async () => {
    const count = async (q: string) => entryIds((await owner.get(`/dashboard/audit?${q}`)).text).length;
    expect(await count('channel=http&decision=require_approval')).toBe(1);
    expect(await count('channel=http&decision=deny')).toBe(1);
    expect(await count('channel=http&status=503')).toBe(1);
    expect(await count('channel=http&status=200')).toBe(5);
    expect(await count(`identity_id=${agent.id}`)).toBe(6);
    expect(await count(`identity_id=${other.id}&source_id=up`)).toBe(2);
    expect(await count('source_id=nowhere')).toBe(0);
    expect(await count(`request_id=${requestIds.queued}`)).toBe(1);
    expect(await count('channel=admin')).toBeGreaterThan(0);
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect(await count(`channel=http&from=${encodeURIComponent(future)}`)).toBe(0);
    // A browser's datetime-local value (no offset) reads as UTC; blank fields of the GET form are ignored.
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString().slice(0, 16);
    expect(await count(`channel=http&from=${hourAgo}&to=&identity_id=&decision=`)).toBe(8);
    const approval = (await world.admin('GET', '/api/approvals?status=pending')).json[0].id as number;
    expect(await count(`approval_id=${approval}`)).toBeGreaterThanOrEqual(1);
    // The form shows the filter it ran with.
    expect((await owner.get('/dashboard/audit?decision=deny')).text).toMatch(/<option value="deny" selected/);
  });

  it('pages by keyset: every match once, newest first, the same pages while new entries arrive', async () => {
    const all = entryIds((await owner.get('/dashboard/audit?channel=http')).text);
    let url: string | null = '/dashboard/audit?channel=http&limit=3';
    const seen: string[] = [];
    let pages = 0;
    while (url) {
      const page = await owner.get(url);
      expect(page.status).toBe(200);
      seen.push(...entryIds(page.text));
      url = nextLink(page.text);
      expect(url ?? '').not.toMatch(/offset/);
      pages++;
      // A new entry arriving between pages does not shift the ones still to come.
      if (pages === 1) await world.proxy(agent.key, 'GET', '/proxy/up/orders?late=1');
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(all);
  });

  it('shows one entry with its decision trace', async () => {
    const [queued] = await waitForEntries(`request_id=${requestIds.queued}`, 1);
    const page = await owner.get(`/dashboard/audit/${String(queued!.id)}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<h2>Decision trace</h2>');
    expect(page.text).toContain('<tr><td>1</td><td>approval: policy requires approval</td></tr>');
    expect(page.text).toMatch(/<a href="\/dashboard\/policies\/\d+">Policy #\d+<\/a> applied/);
    expect(page.text).toContain('<span class="badge warn">require_approval</span> <span> status 202</span>');
    expect(page.text).toMatch(/href="\/dashboard\/approvals\/\d+"/);
    expect(page.text).toContain('POST /orders');
    const [denied] = await waitForEntries(`request_id=${requestIds.denied}`, 1);
    const deniedPage = await owner.get(`/dashboard/audit/${String(denied!.id)}`);
    expect(deniedPage.text).toContain('<span class="badge bad">deny</span>');
    expect((await owner.get(`/dashboard/audit/${newAuditId()}`)).status).toBe(404);
    expect((await owner.get('/dashboard/audit/not-a-uuid')).status).toBe(404);
  });

  it('answers invalid filters with the page and the message at the field', async () => {
    const bad = await owner.get('/dashboard/audit?identity_id=abc&channel=carrier-pigeon&source_id=up');
    expect(bad.status).toBe(422);
    expect(fieldError(bad.text, 'identity_id')).toBeTruthy();
    expect(fieldError(bad.text, 'channel')).toBeTruthy();
    expect(bad.text).toMatch(/<input id="f-source_id" name="source_id"[^>]* value="up"/);
    const cursor = await owner.get('/dashboard/audit?cursor=garbage');
    expect(cursor.status).toBe(422);
    expect(cursor.text).toContain('start again from the first page');
    const order = await owner.get('/dashboard/audit?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z');
    expect(order.status).toBe(422);
    expect(fieldError(order.text, 'to')).toBe('Must be later than From.');
    expect((await owner.get('/dashboard/audit?status=42')).status).toBe(422);
    expect((await owner.get('/dashboard/audit/export?format=xlsx')).status).toBe(422);
  });

  it('exports the current filter as NDJSON and as CSV, streamed, with formulas neutralized', async () => {
    const page = await owner.get(`/dashboard/audit?identity_id=${agent.id}&channel=http`);
    const csvHref = /href="(\/dashboard\/audit\/export\?[^"]*format=csv)"/.exec(page.text)![1]!.replace(/&amp;/g, '&');
    expect(csvHref).toContain(`identity_id=${agent.id}`);
    const ndjson = await owner.get(`/dashboard/audit/export?identity_id=${agent.id}&channel=http&format=jsonl`);
    expect(ndjson.status).toBe(200);
    expect(ndjson.headers.get('content-type')).toContain('application/x-ndjson');
    expect(ndjson.headers.get('content-disposition')).toMatch(/^attachment; filename="audit-.*\.jsonl"$/);
    const lines = ndjson.text.trim().split('\n').map((l) => JSON.parse(l) as { identity_id: number; channel: string });
    expect(lines.length).toBeGreaterThanOrEqual(6);
    expect(lines.every((l) => l.identity_id === agent.id && l.channel === 'http')).toBe(true);

    // A stored text starting with a formula character (a spreadsheet would evaluate it) is exported quoted.
    const client = await world.svc.database!.connect();
    const id = newAuditId();
    try {
      await client.query(
        `insert into audit_entries (id, ts, request_id, channel, identity_id, source_id, method, path, decision, status, reasons)
         values ($1, now(), $2, 'http', $3, 'up', '@SUM(A1)', '+1-555', 'deny', 403, $4)`,
        [id, '=HYPERLINK("http://evil.example","x")', agent.id, ['-2+3']],
      );
    } finally {
      await client.end();
    }
    const csv = await owner.get(csvHref);
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toContain('text/csv');
    const rows = csv.text.trim().split('\r\n');
    expect(rows[0]!.startsWith('id,ts,request_id,channel,identity_id')).toBe(true);
    expect(rows).toHaveLength(lines.length + 2);
    const evil = rows.find((r) => r.startsWith(id))!;
    expect(evil).toContain(`"'=HYPERLINK(""http://evil.example"",""x"")"`);
    expect(evil).toContain(",'@SUM(A1),'+1-555,");
    expect(evil).not.toMatch(/,[=+\-@]/);
  });

  it("the alerts console's audit link opens the explorer filtered to the rule's scope and window", async () => {
    const created = await world.admin('POST', '/api/alerts', { name: 'agent errors', condition_type: 'error_rate', threshold: 0.5, identity_id: String(agent.id), source_id: 'up', notification_channel: 'log' });
    expect(created.status, created.text).toBe(201);
    const rulePage = await owner.get(`/dashboard/alerts/${created.json.id}`);
    expect(rulePage.status).toBe(200);
    const link = /<a href="([^"]+)">Audit entries of this scope in the current window<\/a>/.exec(rulePage.text)![1]!.replace(/&amp;/g, '&');
    expect(link.startsWith('/dashboard/audit?')).toBe(true);
    const q = new URL(link, 'http://x').searchParams;
    expect(q.get('identity_id')).toBe(String(agent.id));
    expect(q.get('source_id')).toBe('up');
    expect(Date.parse(q.get('to')!) - Date.parse(q.get('from')!)).toBeGreaterThanOrEqual(300_000);
    const explorer = await owner.get(link);
    expect(explorer.status).toBe(200);
    expect(entryIds(explorer.text).length).toBeGreaterThanOrEqual(6);
    expect(explorer.text).toContain(`value="${agent.id}"`);
  });
});
