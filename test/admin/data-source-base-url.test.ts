// Registering an HTTP source refuses base URLs a second parser would read differently: 422 at connection_config.base_url with the reason, on create, update and connection test, and nothing is stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCEPTED_BASE_URLS, REFUSED_BASE_URLS } from '../governance/base-url-table.js';
import { startResourceFixture, type ResourceFixture } from './support.js';

let fx: ResourceFixture;

beforeAll(async () => {
  fx = await startResourceFixture();
  const created = await fx.api('POST', '/api/data-sources', { name: 'Base', source_id: 'base-ok', source_type: 'http', connection_config: { base_url: 'https://api.example.com/v1/' } });
  expect(created.status, created.text).toBe(201);
}, 60_000);

afterAll(async () => {
  await fx?.stop();
});

/** The one validation item at connection_config.base_url, whose message must give the reason. */
function baseUrlItem(res: { status: number; text: string; json: { detail?: Array<{ loc: unknown[]; msg: string; type: string }> } }, why: string): void {
  expect(res.status, res.text).toBe(422);
  const item = res.json.detail?.find((d) => JSON.stringify(d.loc) === JSON.stringify(['body', 'connection_config', 'base_url']));
  expect(item, res.text).toBeDefined();
  expect(item!.msg.toLowerCase(), res.text).toContain(why.toLowerCase());
  expect(typeof item!.type).toBe('string');
}

describe('base URL validation at registration', () => {
  it.each(REFUSED_BASE_URLS.map(([u, why]) => [JSON.stringify(u), u, why] as const))('refuses %s on create, update and test', async (_n, url, why) => {
    const n = REFUSED_BASE_URLS.findIndex(([u]) => u === url);
    baseUrlItem(await fx.api('POST', '/api/data-sources', { name: `bad ${n}`, source_id: `bad-${n}`, source_type: 'http', connection_config: { base_url: url } }), why);
    expect((await fx.api('GET', `/api/data-sources/bad-${n}`)).status).toBe(404);
    baseUrlItem(await fx.api('PATCH', '/api/data-sources/base-ok', { connection_config: { base_url: url } }), why);
    baseUrlItem(await fx.api('POST', '/api/data-sources/test', { source_type: 'http', connection_config: { base_url: url } }), why);
  });

  it('the refused updates left the stored base URL alone', async () => {
    const res = await fx.api('GET', '/api/data-sources/base-ok');
    expect(res.json.connection_config.base_url).toBe('https://api.example.com/v1/');
  });

  it.each(ACCEPTED_BASE_URLS.map((u, i) => [u, i] as const))('accepts %s', async (url, i) => {
    const res = await fx.api('POST', '/api/data-sources', { name: `good ${i}`, source_id: `good-${i}`, source_type: 'http', connection_config: { base_url: url } });
    expect(res.status, res.text).toBe(201);
  });
});
