// The console overview: where sign-in lands; unauthenticated browsers are sent to the sign-in page, signed-in admins see the live figures and readiness (the figures themselves: test/console/overview.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER_PASSWORD, startWorld, type World } from '../support/world.js';
import { login } from '../support/admin-client.js';

let world: World;

beforeAll(async () => {
  world = await startWorld();
});

afterAll(async () => {
  await world?.stop();
});

describe('GET /dashboard/overview', () => {
  it('sends an unauthenticated browser to sign in, and shows a signed-in admin the overview', async () => {
    const anonymous = await fetch(`${world.svc.adminUrl}/dashboard/overview`, { redirect: 'manual', headers: { accept: 'text/html' } });
    expect(anonymous.status).toBe(303);
    expect(anonymous.headers.get('location')).toMatch(/^\/auth\/login\?next=/);

    await world.agent('overview-agent');
    const signedIn = await login(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
    expect(signedIn.status).toBe(303);
    expect(signedIn.headers.get('location')).toBe('/dashboard/overview');
    const res = await fetch(`${world.svc.adminUrl}/dashboard/overview`, { headers: { cookie: signedIn.cookie! } });
    const html = await res.text();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(html).toContain('Signed in as <strong>admin</strong>');
    expect(html).toMatch(/<strong>0<\/strong> approvals waiting/);
    expect(html).toContain('<h2>Readiness: ok</h2>');
  });
});
