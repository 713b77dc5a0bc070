// Contract details of the admin listener (spec §2 validation shape, §4): integer path ids, malformed JSON, the HTML redirect at /, and an OpenAPI document that lists every route.
import type { RouteOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdminApp } from '../../src/admin/app.js';
import { answer } from '../support/admin-client.js';
import { startResourceFixture, type ResourceFixture } from './support.js';

let fx: ResourceFixture;

beforeAll(async () => {
  fx = await startResourceFixture();
}, 60_000);

afterAll(async () => {
  await fx?.stop();
});

function rawJson(method: string, path: string, body: string) {
  return fetch(fx.svc.adminUrl + path, { method, headers: { authorization: `Bearer ${fx.token}`, 'content-type': 'application/json' }, body }).then(answer);
}

describe('validation messages say what is wrong', () => {
  it.each(['abc', '1.5', '1e3x'])('a non-integer path id (%s) is a 422 saying it is not an integer', async (id) => {
    const res = await fx.api('GET', `/api/identities/${id}`);
    expect(res.status, res.text).toBe(422);
    expect(res.json.detail).toEqual([expect.objectContaining({ loc: ['path', 'id'], msg: expect.stringMatching(/integer/) })]);
    expect(res.json.detail[0].msg).not.toMatch(/required/i);
    expect(res.json.detail[0].type).not.toBe('missing');
  });

  it('a wrong-typed body field is not reported as missing; an absent one is', async () => {
    const res = await fx.api('POST', '/api/identities', { name: 12, generate_key: true });
    expect(res.status, res.text).toBe(422);
    const item = (res.json.detail as Array<{ loc: unknown[]; msg: string; type: string }>).find((d) => JSON.stringify(d.loc) === '["body","name"]');
    expect(item?.type).toBe('type_error');
    expect(item?.msg).not.toMatch(/required/i);
    const absent = await fx.api('POST', '/api/identities', { generate_key: true });
    expect(absent.json.detail).toContainEqual({ loc: ['body', 'name'], msg: 'Field required', type: 'missing' });
  });

  it.each(['{"name": "x",', '{bad json}', '{"__proto__": {"x": 1}}', ''])('a body that is not acceptable JSON (%j) is a 422 json_invalid at loc ["body"]', async (body) => {
    const res = await rawJson('POST', '/api/identities', body);
    expect(res.status, res.text).toBe(422);
    expect(res.json).toEqual({ detail: [{ loc: ['body'], msg: expect.stringMatching(/JSON/), type: 'json_invalid' }] });
  });
});

describe('GET / on the admin', () => {
  it('redirects to the overview as text/html (spec §4)', async () => {
    const res = await fetch(fx.svc.adminUrl + '/', { redirect: 'manual' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/dashboard/overview');
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
  });
});

describe('the OpenAPI document', () => {
  it('lists every route the admin listener registers, with its method', async () => {
    const routes: RouteOptions[] = [];
    const app = await buildAdminApp(fx.svc.running.services, { onRoute: (r) => routes.push(r) });
    await app.close();
    const doc = (await fx.api('GET', '/api/openapi.json')).json as { paths: Record<string, Record<string, unknown>> };
    const registered = routes.flatMap((r) => (Array.isArray(r.method) ? r.method : [r.method]).filter((m) => m !== 'HEAD').map((m) => `${m} ${r.url.replace(/:([A-Za-z_]+)/g, '{$1}')}`));
    expect(registered.length).toBeGreaterThan(40);
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`));
    expect(registered.filter((r) => !documented.includes(r))).toEqual([]);
    // Nothing documented that is not served.
    expect(documented.filter((d) => !registered.includes(d))).toEqual([]);
    expect(documented).toEqual(expect.arrayContaining(['GET /api/audit', 'GET /api/audit/export', 'POST /dashboard/policies/dry-run', 'GET /dashboard/overview']));
    const page = doc.paths['/dashboard/overview']!.get as { responses: Record<string, { content?: Record<string, unknown> }> };
    expect(Object.keys(page.responses['200']!.content!)).toEqual(['text/html']);
  });
});
