// An HTTP source described by an OpenAPI document: captured from a real upstream (operations, parameters, response property names through $ref and arrays), diffed on change, and a failed fetch recorded.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDataSource } from '../../src/store/repos/data-sources.js';
import { latestStructure, listChanges } from '../../src/store/repos/catalog.js';
import type { CatalogStructure } from '../../src/catalog/model.js';
import { catalogWorld, type CatalogWorld } from './support.js';

let w: CatalogWorld;
let server: Server;
let doc: Record<string, unknown>;
let seenAuth: string | undefined;

const v1 = () => ({
  openapi: '3.0.3',
  paths: {
    '/users/{id}': {
      parameters: [{ name: 'id', in: 'path', required: true }],
      get: { responses: { '200': { content: { 'application/json': { schema: { $ref: '#/components/schemas/User' } } } } } },
      delete: { responses: { '204': { description: 'gone' } } },
    },
    '/users': { get: { parameters: [{ name: 'limit', in: 'query' }], responses: { '200': { content: { 'application/json': { schema: { type: 'array', items: { $ref: '#/components/schemas/User' } } } } } } } },
  },
  components: { schemas: { User: { type: 'object', properties: { id: { type: 'integer' }, email: { type: 'string' }, address: { type: 'object', properties: { city: { type: 'string' } } } } } } },
});

beforeAll(async () => {
  w = await catalogWorld();
  doc = v1();
  server = createServer((req, res) => {
    seenAuth = req.headers['x-api-key'] as string | undefined;
    if (req.url !== '/api/openapi.json') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  await createDataSource(w.control.store.db, {
    source_id: 'oas', name: 'oas', source_type: 'http', connector_key: null, cache_strategy: 'deterministic_first', enabled: true, metadata: {},
    connection_config: { base_url: `http://127.0.0.1:${port}/api`, openapi_path: '/openapi.json', auth_header: 'X-Api-Key', auth_scheme: '', token: 'upstream-token' },
  } as never);
});
afterAll(async () => {
  await new Promise((r) => server?.close(r));
  await w?.close();
});

describe('OpenAPI capture', () => {
  it('captures operations, parameters and response properties from the upstream, with the source credential', async () => {
    expect(await w.scanner().scanner.scan('oas', 'demand')).toMatchObject({ status: 'ok', version: 1 });
    expect(seenAuth).toBe('upstream-token');
    const s = (await latestStructure(w.control.store.db, 'oas'))!.structure as unknown as CatalogStructure;
    expect(s.kind).toBe('openapi');
    expect(s.operations).toEqual([
      { method: 'GET', path: '/users', parameters: ['query:limit'], response_properties: ['address', 'address.city', 'email', 'id'] },
      { method: 'GET', path: '/users/{id}', parameters: ['path:id'], response_properties: ['address', 'address.city', 'email', 'id'] },
      { method: 'DELETE', path: '/users/{id}', parameters: ['path:id'], response_properties: [] },
    ]);
  });

  it('reports added and removed operations and changed response properties', async () => {
    const next = v1() as { paths: Record<string, Record<string, unknown>>; components: { schemas: { User: { properties: Record<string, unknown> } } } };
    delete next.paths['/users/{id}']!.delete;
    next.paths['/orders'] = { get: { responses: { '200': { description: 'ok' } } } };
    next.components.schemas.User.properties.phone = { type: 'string' };
    doc = next as unknown as Record<string, unknown>;
    expect(await w.scanner().scanner.scan('oas', 'demand')).toMatchObject({ status: 'ok', changes: 4 });
    const changes = (await listChanges(w.control.store.db, 'oas')).map((c) => `${c.kind} ${c.path}`).sort();
    expect(changes).toEqual(['added GET /orders', 'changed GET /users', 'changed GET /users/{id}', 'removed DELETE /users/{id}']);
  });

  it('a document that is not there records a failed snapshot', async () => {
    await w.control.store.db.updateTable('data_sources').set({ connection_config: JSON.stringify({ base_url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`, openapi_path: '/missing.json' }) }).where('source_id', '=', 'oas').execute();
    expect(await w.scanner().scanner.scan('oas', 'demand')).toMatchObject({ status: 'failed', error: 'the OpenAPI document answered HTTP 404' });
  });
});
