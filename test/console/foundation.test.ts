// The console foundation over HTTP: security headers on every response, static assets served by Gatehouse, the theme form (spec §2 "Theme"), form errors as pages, errors as pages for browsers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import { answer } from '../support/admin-client.js';
import { BROWSER_ACCEPT, ConsoleClient, fieldError, inputValue } from './support/pages.js';

let world: World;
let owner: ConsoleClient;

beforeAll(async () => {
  world = await startWorld();
  owner = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
});

afterAll(async () => {
  await world?.stop();
});

function expectSecurityHeaders(h: Headers): void {
  const csp = h.get('content-security-policy') ?? '';
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).toContain("script-src 'self'");
  expect(csp).not.toContain('unsafe-inline');
  expect(csp).not.toContain('unsafe-eval');
  expect(csp).toContain("default-src 'none'");
  expect(h.get('x-content-type-options')).toBe('nosniff');
  expect(h.get('referrer-policy')).toBe('same-origin');
}

describe('security headers', () => {
  it('are on pages, the sign-in page, assets, the JSON API, errors and the / redirect (text/html)', async () => {
    const root = await answer(await fetch(`${world.svc.adminUrl}/`, { redirect: 'manual' }));
    expect(root.status).toBe(302);
    expect(root.headers.get('content-type')).toMatch(/^text\/html/);
    expect(root.headers.get('location')).toBe('/dashboard/overview');
    expectSecurityHeaders(root.headers);
    for (const res of [
      await owner.get('/dashboard/overview'),
      await answer(await fetch(`${world.svc.adminUrl}/auth/login`)),
      await answer(await fetch(`${world.svc.adminUrl}/console/assets/console.css`)),
      await world.admin('GET', '/api/session'),
      await owner.get('/dashboard/nowhere'),
    ]) {
      expectSecurityHeaders(res.headers);
    }
  });

  it('pages load no script or style from outside and carry no inline script', async () => {
    for (const html of [(await owner.get('/dashboard/overview')).text, (await answer(await fetch(`${world.svc.adminUrl}/auth/login`))).text]) {
      const scripts = [...html.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
      expect(scripts.length).toBeGreaterThan(0);
      for (const [, attrs, body] of scripts) {
        expect(attrs).toMatch(/src="\/console\/assets\//);
        expect(body).toBe('');
      }
      expect(html).not.toMatch(/<style|style="|https?:\/\//);
      expect(html).toMatch(/<link rel="stylesheet" href="\/console\/assets\/console\.css\?v=/);
    }
  });
});

describe('static assets', () => {
  it('serves the console assets and the vendored htmx and uPlot without a session, with validators', async () => {
    for (const [name, type] of [
      ['console.css', 'text/css'],
      ['console.js', 'text/javascript'],
      ['htmx.min.js', 'text/javascript'],
      ['uPlot.min.js', 'text/javascript'],
      ['uPlot.min.css', 'text/css'],
    ] as const) {
      const res = await fetch(`${world.svc.adminUrl}/console/assets/${name}`);
      expect(res.status, name).toBe(200);
      expect(res.headers.get('content-type')).toContain(type);
      const etag = res.headers.get('etag')!;
      expect((await res.text()).length).toBeGreaterThan(100);
      const again = await fetch(`${world.svc.adminUrl}/console/assets/${name}`, { headers: { 'if-none-match': etag } });
      expect(again.status).toBe(304);
    }
    expect((await fetch(`${world.svc.adminUrl}/console/assets/package.json`)).status).toBe(404);
    expect((await fetch(`${world.svc.adminUrl}/console/assets/..%2F..%2Fpackage.json`)).status).toBe(404);
    expect((await fetch(`${world.svc.adminUrl}/console/assets/__proto__`)).status).toBe(404);
  });
});

describe('POST /dashboard/theme', () => {
  it('keeps the theme in a cookie, applies it on every page and goes to a local next', async () => {
    const res = await owner.post('/dashboard/theme', { theme: 'dark', next: '/dashboard/overview?x=1' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/dashboard/overview?x=1');
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith('gatehouse_theme='))!;
    expect(cookie).toMatch(/^gatehouse_theme=dark;/);
    expect(cookie).toMatch(/HttpOnly/i);
    const page = await owner.get('/dashboard/overview', { cookie: `${owner.admin.cookie}; gatehouse_theme=dark` });
    expect(page.text).toContain('<html lang="en" data-theme="dark">');
    expect(page.text).toContain('<option value="dark" selected>Dark</option>');
    const signIn = await answer(await fetch(`${world.svc.adminUrl}/auth/login`, { headers: { cookie: 'gatehouse_theme=light' } }));
    expect(signIn.text).toContain('data-theme="light"');
    const bogus = await owner.get('/dashboard/overview', { cookie: `${owner.admin.cookie}; gatehouse_theme=%22%3E%3Cscript%3E` });
    expect(bogus.text).toContain('data-theme="system"');
  });

  it('defaults next to /dashboard/overview and refuses every non-local next', async () => {
    expect((await owner.post('/dashboard/theme', { theme: 'light' })).headers.get('location')).toBe('/dashboard/overview');
    for (const next of ['//evil.example/x', 'https://evil.example/', '/\\evil.example', 'javascript:alert(1)', '/ok\r\nx: y', '']) {
      const res = await owner.post('/dashboard/theme', { theme: 'system', next });
      expect(res.status, next).toBe(303);
      expect(res.headers.get('location'), next).toBe('/dashboard/overview');
    }
  });

  it('answers an invalid theme with the form again (422, message at the field) or the 422 JSON shape', async () => {
    const page = await owner.post('/dashboard/theme', { theme: 'neon', next: '/dashboard/overview' });
    expect(page.status).toBe(422);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(fieldError(page.text, 'theme')).toBe('Choose one of: light, dark, system.');
    expect(page.text).toContain('aria-invalid="true"');
    const json = await owner.post('/dashboard/theme', { theme: 'neon' }, { accept: 'application/json' });
    expect(json.status).toBe(422);
    expect(json.json.detail[0]).toMatchObject({ loc: ['body', 'theme'], type: 'value_error.enum' });
    const missing = await owner.post('/dashboard/theme', {}, { accept: 'application/json' });
    expect(missing.json.detail[0]).toMatchObject({ loc: ['body', 'theme'], msg: 'Field required', type: 'missing' });
  });

  it('refuses a post without the CSRF token or without a session', async () => {
    const noToken = await owner.post('/dashboard/theme', { theme: 'dark' }, { csrf: false });
    expect(noToken.status).toBe(403);
    expect(noToken.headers.get('content-type')).toMatch(/^text\/html/);
    expect(noToken.text).toContain('Missing or invalid CSRF token.');
    expect(noToken.headers.getSetCookie().some((c) => c.startsWith('gatehouse_theme='))).toBe(false);
    const anonymous = await fetch(`${world.svc.adminUrl}/dashboard/theme`, { method: 'POST', body: new URLSearchParams({ theme: 'dark' }), redirect: 'manual' });
    expect(anonymous.status).toBe(401);
  });
});

describe('forms and errors as pages', () => {
  it('shows a sign-in form with a missing field again with the message at the field and the username kept', async () => {
    const res = await answer(
      await fetch(`${world.svc.adminUrl}/auth/login`, { method: 'POST', body: new URLSearchParams({ username: 'someone"&<x>' }), headers: { accept: BROWSER_ACCEPT }, redirect: 'manual' }),
    );
    expect(res.status).toBe(422);
    expect(fieldError(res.text, 'password')).toBe('This field is required.');
    expect(inputValue(res.text, 'username')).toBe('someone&#34;&amp;&lt;x>');
    const json = await answer(await fetch(`${world.svc.adminUrl}/auth/login`, { method: 'POST', body: new URLSearchParams({ username: 'x' }), redirect: 'manual' }));
    expect(json.status).toBe(422);
    expect(json.json.detail[0].loc).toEqual(['body', 'password']);
  });

  it('answers an unknown page with a 404 page for browsers and JSON for the API', async () => {
    const page = await owner.get('/dashboard/nowhere');
    expect(page.status).toBe(404);
    expect(page.text).toContain('There is no page at this address.');
    expect(page.text).toContain('aria-label="Main"');
    const api = await world.admin('GET', '/api/nowhere');
    expect(api.status).toBe(404);
    expect(api.json).toEqual({ detail: 'Not found' });
  });
});
