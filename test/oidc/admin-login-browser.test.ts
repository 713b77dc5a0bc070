// The admin single sign-on in a real browser (Playwright + Debian chromium): the sign-in page's button → the provider's login and consent pages → the callback → the overview, signed in with local ∪ group roles.
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage } from '../console/support/browser.js';
import { startWorld, type World } from '../support/world.js';
import { TestProvider } from '../support/oidc-provider.js';
import { ADMIN_CLIENT, oidcEnv } from './support.js';
import { freePort } from '../support/ports.js';

let provider: TestProvider;
let world: World;
let browser: Browser;

beforeAll(async () => {
  // The browser must come back to the real admin listener, so its port is chosen before the provider registers it.
  const adminPort = await freePort();
  const redirectUri = `http://127.0.0.1:${adminPort}/auth/oidc/callback`;
  provider = await TestProvider.start({ adminClient: { ...ADMIN_CLIENT, redirect_uris: [redirectUri] } });
  world = await startWorld({
    env: { ...oidcEnv(provider), SERVICE_ADMIN__PORT: String(adminPort), SERVICE_AUTH__OIDC__ADMIN_REDIRECT_URI: redirectUri, SERVICE_AUTH__OIDC__ADMIN_GROUP_ROLE_MAP: JSON.stringify({ 'gatehouse-approvers': ['approver'] }) },
  });
  const created = await world.admin('POST', '/api/admins', { username: 'browser-admin', password: 'a-long-enough-password-917', roles: ['viewer'], must_change_password: false });
  provider.addAccount({ sub: 'browser-sub', groups: ['gatehouse-approvers'] });
  expect((await world.admin('PUT', `/api/admin-auth/oidc/admins/${created.json.id}`, { subject: 'browser-sub' })).status).toBe(200);
  browser = await launchBrowser();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await world?.stop();
  await provider?.stop();
});

test('console button → provider login page → callback → overview', async () => {
  const w = await openPage(browser);
  await w.page.goto(`${world.svc.adminUrl}/auth/login`);
  await w.page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
  // The provider's own pages (oidc-provider's development login and consent forms).
  await w.page.waitForURL((u) => u.href.startsWith(provider.issuer));
  await w.page.locator('input[name="login"]').fill('browser-sub');
  await w.page.locator('input[name="password"]').fill('anything');
  await w.page.locator('button[type="submit"]').click();
  await w.page.locator('button[type="submit"]').click(); // consent: "Continue"
  await w.page.waitForURL(`${world.svc.adminUrl}/dashboard/overview`);
  const session = await w.page.evaluate(async () => (await fetch('/api/session')).json());
  expect(session).toMatchObject({ username: 'browser-admin', roles: ['approver', 'viewer'], must_change_password: false });
  expect(w.pageErrors ?? []).toEqual([]);
}, 60_000);
