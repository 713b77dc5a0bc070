// The console layout in a real browser: built-in password sign-in with the forced change, the layout's navigation and theme, keyboard use, phone width, axe (no serious or critical violations) and no CSP refusals.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_INITIAL_PASSWORD } from '../../src/admin/auth/passwords.js';
import { startTestService, type TestService } from '../support/service.js';
import { axeViolations, describeViolations, launchBrowser, openPage, screenshot, signIn, type WatchedPage } from './support/browser.js';

const NEW_PASSWORD = 'console-owner-password-4711';

let svc: TestService;
let browser: Browser;

beforeAll(async () => {
  [svc, browser] = await Promise.all([startTestService(), launchBrowser()]);
});

afterAll(async () => {
  await browser?.close();
  await svc?.stop();
});

async function expectAccessible(w: WatchedPage, name: string): Promise<void> {
  const violations = await axeViolations(w.page);
  expect(violations, `${name}:\n${describeViolations(violations)}`).toEqual([]);
  await screenshot(w.page, name);
}

function expectQuiet(w: WatchedPage): void {
  expect(w.dialogs).toEqual([]);
  expect(w.consoleErrors, w.consoleErrors.join('\n')).toEqual([]);
  expect(w.pageErrors).toEqual([]);
}

describe('console layout in chromium', () => {
  it('signs in with the built-in password, forces the change, then shows the layout', async () => {
    const w = await openPage(browser);
    await w.page.goto(`${svc.adminUrl}/auth/login`);
    await expectAccessible(w, 'sign-in');
    await signIn(w.page, svc.adminUrl, 'admin', DEFAULT_INITIAL_PASSWORD);
    // Every page but the change form is closed until the built-in password is replaced.
    await w.page.goto(`${svc.adminUrl}/dashboard/overview`);
    await expect(w.page.getByRole('heading', { level: 1 })).toBeDefined();
    expect(await w.page.locator('h1').textContent()).toBe('Change password');
    expect(await w.page.locator('nav[aria-label="Main"]').count()).toBe(0);
    await expectAccessible(w, 'change-password-forced');
    await w.page.getByLabel('Current password').fill(DEFAULT_INITIAL_PASSWORD);
    await w.page.getByLabel(/^New password/).fill('short');
    await w.page.getByLabel('Repeat the new password').fill('short');
    await w.page.getByRole('button', { name: 'Change password' }).click();
    await w.page.waitForLoadState();
    expect(await w.page.locator('#f-new_password-error').textContent()).toMatch(/^The new password .*12/);
    await w.page.getByLabel('Current password').fill(DEFAULT_INITIAL_PASSWORD);
    await w.page.getByLabel(/^New password/).fill(NEW_PASSWORD);
    await w.page.getByLabel('Repeat the new password').fill(NEW_PASSWORD);
    await Promise.all([w.page.waitForURL(`${svc.adminUrl}/dashboard/overview`), w.page.getByRole('button', { name: 'Change password' }).click()]);
    expect(await w.page.locator('h1').textContent()).toBe('Overview');
    expect(await w.page.locator('.whoami').textContent()).toContain('Signed in as admin (owner)');
    expect(await w.page.locator('nav[aria-label="Main"] a[aria-current="page"]').textContent()).toBe('Overview');
    expect(await w.page.locator('nav[aria-label="Breadcrumb"]').textContent()).toContain('Overview');
    // Our scripts ran under the CSP (htmx loaded and configured without inline styles).
    expect(await w.page.evaluate('typeof window.htmx')).toBe('object');
    await expectAccessible(w, 'overview');
    expectQuiet(w);
    await w.context.close();
  });

  it('switches the theme with the form and keeps it on every page', async () => {
    const w = await openPage(browser);
    await signIn(w.page, svc.adminUrl, 'admin', NEW_PASSWORD);
    expect(await w.page.getAttribute('html', 'data-theme')).toBe('system');
    await w.page.getByLabel('Theme').selectOption('dark');
    await Promise.all([w.page.waitForURL(`${svc.adminUrl}/dashboard/overview`), w.page.getByRole('button', { name: 'Apply' }).click()]);
    expect(await w.page.getAttribute('html', 'data-theme')).toBe('dark');
    const background = await w.page.evaluate('getComputedStyle(document.body).backgroundColor');
    expect(background).toBe('rgb(20, 23, 28)');
    await expectAccessible(w, 'overview-dark');
    await w.page.goto(`${svc.adminUrl}/dashboard/nowhere`);
    expect(await w.page.getAttribute('html', 'data-theme')).toBe('dark');
    expectQuiet(w);
    await w.context.close();
  });

  it('is keyboard navigable: the first Tab reaches the skip link, which moves focus to the content', async () => {
    const w = await openPage(browser);
    await signIn(w.page, svc.adminUrl, 'admin', NEW_PASSWORD);
    await w.page.keyboard.press('Tab');
    expect(await w.page.evaluate('document.activeElement.textContent')).toBe('Skip to content');
    await w.page.keyboard.press('Enter');
    expect(await w.page.evaluate('document.activeElement.id')).toBe('main');
    await w.page.keyboard.press('Tab');
    // The next stop after the skip target is inside the page content or the navigation, never lost on <body>.
    expect(await w.page.evaluate('document.activeElement.tagName')).not.toBe('BODY');
    await w.context.close();
  });

  it('fits a phone-width screen without sideways scrolling', async () => {
    const w = await openPage(browser, { viewport: { width: 390, height: 844 } });
    await signIn(w.page, svc.adminUrl, 'admin', NEW_PASSWORD);
    expect(await w.page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    expect(await w.page.locator('nav[aria-label="Main"]').isVisible()).toBe(true);
    await expectAccessible(w, 'overview-phone');
    await w.page.goto(`${svc.adminUrl}/auth/login`);
    expect(await w.page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await w.context.close();
  });
});
