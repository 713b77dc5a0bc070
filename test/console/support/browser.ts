// Playwright harness for console tests: Debian's chromium through playwright-core, pages that record dialogs and console errors, axe-core checks and screenshots under test-artifacts/.
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

/** Launch flags that work here without downloads (STACK-NOTES: playwright-core + Debian chromium). */
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
export const CHROMIUM_PATH = process.env.GATEHOUSE_CHROMIUM ?? '/usr/bin/chromium';

/** Where screenshots go (gitignored; CI keeps the folder as test artifacts). */
export const ARTIFACTS_DIR = path.resolve('test-artifacts/console');

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true });
}

/** A page plus what it reported: dialogs (an XSS would open one), console errors (CSP refusals land here) and page errors. */
export interface WatchedPage {
  page: Page;
  context: BrowserContext;
  dialogs: string[];
  consoleErrors: string[];
  pageErrors: string[];
}

export async function openPage(browser: Browser, opts: { viewport?: { width: number; height: number }; colorScheme?: 'light' | 'dark' } = {}): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport: opts.viewport ?? { width: 1280, height: 900 }, colorScheme: opts.colorScheme ?? 'light' });
  // Shorter than the test timeout, so a step that waits in vain fails with its own message.
  context.setDefaultTimeout(10_000);
  const page = await context.newPage();
  const watched: WatchedPage = { page, context, dialogs: [], consoleErrors: [], pageErrors: [] };
  page.on('dialog', (d) => {
    watched.dialogs.push(`${d.type()}: ${d.message()}`);
    void d.dismiss();
  });
  page.on('console', (m) => {
    // Chromium reports every non-2xx document as a console error; a 403/404/422 page is an answer, not a fault.
    if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of (4\d\d)/.test(m.text())) watched.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => watched.pageErrors.push(String(e)));
  return watched;
}

let axeSource: string | null = null;

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: unknown; failureSummary?: string }>;
}

/**
 * Runs axe-core in the page. The source is evaluated through the DevTools protocol rather than added as a
 * <script>, which the console's CSP (script-src 'self') would refuse, as it should.
 */
export async function axeViolations(page: Page, impacts: readonly string[] = ['serious', 'critical']): Promise<AxeViolation[]> {
  axeSource ??= await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  const loaded = await page.evaluate('typeof window.axe');
  if (loaded !== 'object') await page.evaluate(axeSource);
  const violations = (await page.evaluate(`window.axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target, failureSummary: n.failureSummary })) })))`)) as AxeViolation[];
  return violations.filter((v) => v.impact !== null && impacts.includes(v.impact));
}

/** Formats violations for an assertion message. */
export function describeViolations(vs: readonly AxeViolation[]): string {
  return vs.map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.map((n) => JSON.stringify(n.target)).join(', ')}`).join('\n');
}

export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(ARTIFACTS_DIR, { recursive: true });
  const file = path.join(ARTIFACTS_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** Signs in through the form; lands wherever the console sends the admin next. */
export async function signIn(page: Page, adminUrl: string, username: string, password: string): Promise<void> {
  await page.goto(`${adminUrl}/auth/login`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel(/^Password/).fill(password);
  await Promise.all([page.waitForURL((u) => !u.pathname.startsWith('/auth/login')), page.getByRole('button', { name: 'Sign in' }).click()]);
}
