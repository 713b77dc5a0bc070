// Every console page in a real browser (Debian chromium): the page list comes from the admin API description (every GET that produces text/html under /dashboard or /auth), each page is checked with axe-core in light and dark (no serious or critical violations) and shown with records named with script and attribute payloads (an identity, a source, a policy, an SQL statement awaiting approval, its audit entries, an alert rule, an admin's subject and token): nothing executes, nothing is injected, no console error, and the payloads read back as text.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdentity } from '../../src/store/repos/identities.js';
import { updateRule } from '../../src/alerts/rules.js';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import { startRecordingUpstream, sendJson, type RecordingUpstream } from '../gateway/proxy/support.js';
import { axeViolations, describeViolations, launchBrowser, openPage, screenshot, signIn, type WatchedPage } from './support/browser.js';

const ISSUER = 'https://idp.example.com/realms/gatehouse';
/** Markup that would run (or inject an element) if any page put it into the HTML unescaped; `tag` says whose it is. */
const payload = (tag: string) => `${tag}<script>alert("${tag}")</script><img src=x onerror="alert('${tag}')">"'><svg onload=alert(1)>&amp;`;
const P = { identity: payload('ident'), source: payload('src'), policy: payload('pol'), sql: `select 1 /* ${payload('sql')} */`, alert: payload('alrt'), token: payload('tok'), subject: payload('sub') };

let world: World;
let upstream: RecordingUpstream;
let browser: Browser;
const ids: Record<string, string> = {};

beforeAll(async () => {
  upstream = await startRecordingUpstream({ '/base/orders': (_req, res) => sendJson(res, 201, { id: 1 }) });
  [world, browser] = await Promise.all([startWorld({ privateSources: ['up'], env: { SERVICE_AUTH__OIDC__ISSUER_URL: ISSUER } }), launchBrowser()]);
  const db = world.svc.running.services.db;
  await world.httpSource('up', `${upstream.base}/base/`);
  // Stored names the API would refuse today (older versions, direct edits) must still render as text.
  await db.updateTable('data_sources').set({ name: P.source }).where('source_id', '=', 'up').execute();
  const agent = await world.agent('xss-agent', [{ source_id: 'up', role_key: 'writer' }]);
  await db.updateTable('identities').set({ name: P.identity, team: P.identity, roles: [P.identity] }).where('id', '=', agent.id).execute();
  const bare = await createIdentity(db, { name: payload('bare'), roles: [], team: null });
  ids.identity = String(agent.id);
  ids.bareIdentity = String(bare.id);
  ids.policy = String(await world.policy({ name: P.policy, priority: 10, conditions: { source_ids: ['up'], methods: ['POST'] }, actions: { effect: 'require_approval' } }));
  // An HTTP write that queues (and is audited), and an SQL statement awaiting approval.
  const queued = await world.proxy(agent.key, 'POST', '/proxy/up/orders', { body: JSON.stringify({ note: P.sql }), headers: { 'content-type': 'application/json' } });
  expect(queued.status, queued.text).toBe(202);
  const sqlApproval = await db
    .insertInto('approvals')
    .values({ identity_id: agent.id, source_id: 'up', sql_text: P.sql, risk_level: 'high', expires_at: new Date(Date.now() + 3_600_000), request_metadata: JSON.stringify({ note: P.sql, reasons: [P.policy] }) as never })
    .returning('id')
    .executeTakeFirstOrThrow();
  ids.approval = String(sqlApproval.id);
  const rule = await world.admin('POST', '/api/alerts', { name: 'xss-rule', condition_type: 'error_rate', threshold: 0.5 });
  expect(rule.status, rule.text).toBe(201);
  ids.alert = String(rule.json.id);
  await updateRule(db, rule.json.id as number, { name: P.alert, description: P.alert }, false);
  const admins = (await world.admin('GET', '/api/admins')).json as Array<{ id: number; username: string }>;
  ids.admin = String(admins.find((a) => a.username === 'admin')!.id);
  // The owner's own subject is set last: it ends the owner's sessions, so the browser signs in after.
  expect((await world.admin('POST', '/api/admin-tokens', { name: P.token })).status).toBe(201);
  expect((await world.admin('PUT', `/api/admin-auth/oidc/admins/${ids.admin}`, { subject: P.subject, email: null })).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await world?.stop();
  await upstream?.close();
});

/** The console's pages, from the API description: every GET answering text/html under /dashboard or /auth. */
async function consolePages(): Promise<string[]> {
  const doc = (await world.admin('GET', '/api/openapi.json')).json as { paths: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, unknown> }> }>> };
  return Object.entries(doc.paths)
    .filter(([path, ops]) => /^\/(dashboard|auth)\//.test(path) && Object.values(ops.get?.responses ?? {}).some((r) => r.content?.['text/html'] !== undefined))
    .map(([path]) => path)
    .filter((path) => !path.startsWith('/auth/oidc/') && !path.includes('/export'))
    .sort();
}

/**
 * Pages whose record this test does not set up, with what they need. They must still answer (a 404 page that says
 * why); their axe and payload checks are in their own tests. Keep this list short.
 */
const NOT_SEEDED: Readonly<Record<string, string>> = {};

/** A page address for a template: the seeded records for known parameters, else the first link to it found on pages already visited. */
function fill(template: string, seen: readonly string[]): string | null {
  const known: Array<[RegExp, string]> = [
    [/^\/dashboard\/access-control\/identities\/\{id\}$/, `/dashboard/access-control/identities/${ids.identity}`],
    [/^\/dashboard\/policies\/\{id\}$/, `/dashboard/policies/${ids.policy}`],
    [/^\/dashboard\/approvals\/\{id\}$/, `/dashboard/approvals/${ids.approval}`],
    [/^\/dashboard\/alerts\/\{id\}(\/edit)?$/, `/dashboard/alerts/${ids.alert}$1`],
    [/^\/dashboard\/admins\/\{id\}$/, `/dashboard/admins/${ids.admin}`],
  ];
  for (const [re, value] of known) if (re.test(template)) return template.replace(re, value);
  if (!template.includes('{')) return template;
  const withSource = template.replace('{source_id}', 'up');
  if (!withSource.includes('{')) return withSource;
  const re = new RegExp(`^${withSource.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/?#]+')}$`);
  return seen.find((href) => re.test(href)) ?? null;
}

function expectNothingRan(w: WatchedPage, where: string): void {
  expect(w.dialogs, `${where}: dialogs`).toEqual([]);
  expect(w.consoleErrors, `${where}: console errors\n${w.consoleErrors.join('\n')}`).toEqual([]);
  expect(w.pageErrors, `${where}: page errors`).toEqual([]);
}

const INJECTED = `document.querySelectorAll('script:not([src]), img[src="x"], svg[onload], [onerror], [onload]').length`;

describe('every console page', () => {
  it('has no serious or critical axe violations in light and dark, and runs none of the stored payloads', async () => {
    const templates = await consolePages();
    // The pages this issue and the earlier ones added must all be in the description.
    for (const must of ['/dashboard/overview', '/dashboard/policies', '/dashboard/policies/{id}', '/dashboard/admins', '/dashboard/account', '/dashboard/approvals/{id}', '/dashboard/access-control/identities/{id}', '/dashboard/data-sources/{source_id}']) expect(templates).toContain(must);
    const seen: string[] = [];
    const checked: string[] = [];
    const unreached: string[] = [];
    // Every page is visited before failing, so one run lists every problem.
    const problems: string[] = [];
    for (const scheme of ['light', 'dark'] as const) {
      const w = await openPage(browser, { colorScheme: scheme });
      await signIn(w.page, world.svc.adminUrl, 'admin', OWNER_PASSWORD);
      // Templates without parameters first, so their links can fill the others'.
      const ordered = [...templates].sort((a, b) => Number(a.includes('{')) - Number(b.includes('{')));
      for (const template of ordered) {
        const path = fill(template, seen);
        if (path === null) {
          if (scheme === 'light') unreached.push(template);
          continue;
        }
        const res = await w.page.goto(world.svc.adminUrl + path);
        const where = `${path} (${scheme})`;
        if (NOT_SEEDED[template] !== undefined) {
          if (res?.status() !== 404) problems.push(`${where}: expected the 404 page for a source without what it needs, got ${res?.status()}`);
          continue;
        }
        if ((res?.status() ?? 500) >= 400) problems.push(`${where}: status ${res?.status()}`);
        seen.push(...((await w.page.evaluate(`[...document.querySelectorAll('a[href^="/"]')].map((a) => a.getAttribute('href'))`)) as string[]));
        if ((await w.page.evaluate(INJECTED)) !== 0) problems.push(`${where}: injected elements`);
        const violations = await axeViolations(w.page);
        if (violations.length > 0) problems.push(`${where}:\n${describeViolations(violations)}`);
        expectNothingRan(w, where);
        await screenshot(w.page, `every-${scheme}${path.replace(/[^a-z0-9]+/gi, '-')}`);
        if (scheme === 'light') checked.push(path);
      }
      await w.context.close();
    }
    expect(problems, problems.join('\n')).toEqual([]);
    // A page whose address needs a record nobody links to would go unchecked: there must be none.
    expect(unreached).toEqual([]);
    expect(checked.length).toBe(templates.length - Object.keys(NOT_SEEDED).filter((t) => templates.includes(t)).length);
  }, 600_000);

  it('shows every payload as text on the pages that list them', async () => {
    const w = await openPage(browser);
    await signIn(w.page, world.svc.adminUrl, 'admin', OWNER_PASSWORD);
    const text = async (path: string) => {
      await w.page.goto(world.svc.adminUrl + path);
      expect(await w.page.evaluate(INJECTED), path).toBe(0);
      return (await w.page.evaluate('document.body.innerText')) as string;
    };
    const shows = (t: string, value: string, where: string) => expect(t.includes(value), `${where} shows ${value.slice(0, 12)}… as text`).toBe(true);
    shows(await text('/dashboard/access-control/identities'), P.identity, 'identities');
    shows(await text(`/dashboard/access-control/identities/${ids.identity}`), P.identity, 'identity page');
    shows(await text('/dashboard/data-sources'), P.source, 'data sources');
    shows(await text('/dashboard/data-sources/up'), P.source, 'data source page');
    shows(await text('/dashboard/policies'), P.policy, 'policies');
    shows(await text(`/dashboard/policies/${ids.policy}`), P.policy, 'policy page');
    shows(await text('/dashboard/approvals'), P.sql.slice(0, 60), 'approvals inbox');
    shows(await text(`/dashboard/approvals/${ids.approval}`), P.sql, 'approval page');
    shows(await text('/dashboard/alerts'), P.alert, 'alerts');
    shows(await text('/dashboard/account'), P.token, 'account tokens');
    shows(await text(`/dashboard/admins/${ids.admin}`), P.subject, 'admin page');
    shows(await text('/dashboard/admins'), P.subject, 'admins');

    // The policy dry run names the payload identity and policy in its form and trace.
    await w.page.goto(`${world.svc.adminUrl}/dashboard/policies/dry-run`);
    await w.page.locator('#f-identity_id').selectOption(ids.identity!);
    await w.page.locator('#f-source_id').selectOption('up');
    await w.page.getByLabel('HTTP method').selectOption('POST');
    await w.page.getByLabel('HTTP path').fill('/orders');
    await Promise.all([w.page.waitForURL('**/dashboard/policies/dry-run'), w.page.getByRole('button', { name: 'Dry run' }).click()]);
    await w.page.waitForSelector('#dry-run-result');
    expect(await w.page.evaluate(INJECTED)).toBe(0);
    shows((await w.page.evaluate('document.body.innerText')) as string, P.policy, 'dry-run trace');
    expect(await w.page.locator('#dry-run-result .badge').first().innerText()).toBe('require_approval');
    const violations = await axeViolations(w.page);
    expect(violations, describeViolations(violations)).toEqual([]);
    await screenshot(w.page, 'every-light-policy-dry-run-result');
    expectNothingRan(w, 'listing pages');
    await w.context.close();
  }, 180_000);
});
