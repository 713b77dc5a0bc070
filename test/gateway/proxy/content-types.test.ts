// Response redaction by content type through the real proxy and a real upstream: every JSON family is parsed and redacted, text-like types are scanned in their charset, and a body the scanner cannot read is refused (502 unscannable_response) or passed per the source's unscannable_responses — audited either way.
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../../support/world.js';
import { oneAuditEntry, startRecordingUpstream, type RecordingUpstream } from './support.js';

const EMAIL = 'jane.doe@example.com';
const SSN = '123-45-6789';
// A PNG signature, then bytes that happen to spell personal data: a text scan must not be trusted with it.
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d]), Buffer.from(` ${EMAIL} ${SSN} `), Buffer.from([0x00, 0xff, 0xfe])]);

let world: World;
let up: RecordingUpstream;
let agent: { key: string };

const send = (type: string | null, body: Buffer | string) => (_req: unknown, res: ServerResponse) => {
  if (type !== null) res.setHeader('content-type', type);
  res.writeHead(200).end(body);
};

const routes = {
  '/ndjson': send('application/x-ndjson', `{"email":"${EMAIL}","n":1}\n{"note":"ssn ${SSN}"}\n`),
  '/ndjson-std': send('application/ndjson', `{"email":"${EMAIL}"}\r\n`),
  '/jsonl': send('application/jsonl; charset=utf-8', `{"email":"${EMAIL}"}\nnot json but ${EMAIL}\n`),
  '/json-seq': send('application/json-seq', `\u001e{"email":"${EMAIL}"}\n\u001e{"ssn":"${SSN}"}\n`),
  '/vnd-json': send('application/vnd.api+json', JSON.stringify({ data: { attributes: { contact: EMAIL } } })),
  '/text-json': send('text/json', JSON.stringify({ contact: EMAIL })),
  '/problem': send('application/problem+json', JSON.stringify({ detail: `no account for ${EMAIL}` })),
  '/yaml': send('application/yaml', `contact: ${EMAIL}\nssn: ${SSN}\n`),
  '/utf16': send('text/plain; charset=utf-16le', Buffer.from(`mail ${EMAIL} now`, 'utf16le')),
  '/png': send('image/png', PNG),
  '/pdf': send('application/pdf', Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.from(EMAIL)])),
  '/zip': send('application/zip', Buffer.concat([Buffer.from('PK\u0003\u0004'), Buffer.from(EMAIL)])),
  '/octet': send('application/octet-stream', Buffer.from(EMAIL)),
  '/unknown': send('application/x-unheard-of', Buffer.from(EMAIL)),
  '/untyped': send(null, Buffer.from(`{"email":"${EMAIL}"}`)),
  '/charset-unknown': send('text/plain; charset=x-klingon', Buffer.from(EMAIL)),
  '/empty-png': send('image/png', Buffer.alloc(0)),
};

beforeAll(async () => {
  up = await startRecordingUpstream(routes);
  world = await startWorld({ privateSources: ['ct', 'ct-pass', 'ct-off', 'ct-refuse-off'], env: { SERVICE_AUDIT__DURABILITY_MODE: 'buffered' } });
  await world.httpSource('ct', up.base);
  await world.httpSource('ct-pass', up.base, { unscannable_responses: 'pass' });
  await world.httpSource('ct-off', up.base);
  await world.httpSource('ct-refuse-off', up.base, { unscannable_responses: 'refuse' });
  agent = await world.agent('ct-reader', ['ct', 'ct-pass', 'ct-off', 'ct-refuse-off'].map((source_id) => ({ source_id, role_key: 'reader' })));
  await world.policy({ name: 'no cache', conditions: { source_ids: ['ct', 'ct-pass', 'ct-off', 'ct-refuse-off'] }, actions: { effect: 'allow', cache: false } });
  // On these sources nothing asks for redaction: no personal-data scan, no columns.
  await world.policy({ name: 'scan off', conditions: { source_ids: ['ct-off', 'ct-refuse-off'] }, actions: { effect: 'allow', pii_mode: 'off' } });
}, 60_000);

afterAll(async () => {
  await world?.stop();
  await up?.close();
});

describe('JSON families and text-like types are redacted', () => {
  it.each([
    ['NDJSON (application/x-ndjson)', '/ndjson'],
    ['NDJSON (application/ndjson, CRLF)', '/ndjson-std'],
    ['JSON Lines with a line that is not JSON', '/jsonl'],
    ['JSON text sequence (application/json-seq)', '/json-seq'],
    ['vendor +json', '/vnd-json'],
    ['text/json', '/text-json'],
    ['problem+json', '/problem'],
    ['YAML', '/yaml'],
  ])('%s', async (_name, path) => {
    const res = await world.proxy(agent.key, 'GET', `/proxy/ct${path}`);
    expect(res.status, res.text).toBe(200);
    expect(res.text).not.toContain(EMAIL);
    expect(res.text).not.toContain(SSN);
    expect(res.text).toContain('[REDACTED:');
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry.redactions).toBeGreaterThan(0);
  });

  it('NDJSON keeps one record per line', async () => {
    const res = await world.proxy(agent.key, 'GET', '/proxy/ct/ndjson');
    const lines = res.text.split('\n');
    expect(lines).toHaveLength(3);
    expect(JSON.parse(lines[0]!)).toEqual({ email: '[REDACTED:email]', n: 1 });
    expect(lines[2]).toBe('');
  });

  it('a JSON text sequence keeps its record separators', async () => {
    const res = await world.proxy(agent.key, 'GET', '/proxy/ct/json-seq');
    expect(res.text).toBe('\u001e{"email":"[REDACTED:email]"}\n\u001e{"ssn":"[REDACTED:ssn]"}\n');
  });

  it('a UTF-16 text body is scanned in its charset and returned as UTF-8', async () => {
    const res = await world.proxy(agent.key, 'GET', '/proxy/ct/utf16');
    expect(res.status).toBe(200);
    expect(res.text).toBe('mail [REDACTED:email] now');
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
  });
});

describe('bodies the scanner cannot read', () => {
  it.each([
    ['image/png', '/png'],
    ['application/pdf', '/pdf'],
    ['application/zip', '/zip'],
    ['application/octet-stream', '/octet'],
    ['application/x-unheard-of', '/unknown'],
    ['no content type', '/untyped'],
    ['charset x-klingon', '/charset-unknown'],
  ])('%s is refused by default while the personal-data scan is on: 502 unscannable_response, audited', async (reason, path) => {
    const before = up.received.length;
    const res = await world.proxy(agent.key, 'GET', `/proxy/ct${path}`);
    expect(res.status, res.text).toBe(502);
    expect(res.json).toMatchObject({ error: 'unscannable_response' });
    expect(res.text).not.toContain(EMAIL);
    expect(up.received.length).toBe(before + 1);
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry.status).toBe(502);
    expect(entry.error_code).toBe('unscannable_response');
    expect(entry.upstream_status).toBe(200);
    expect(entry.reasons).toContain(`redaction: response refused as unscannable (${reason})`);
  });

  it('an empty body has nothing to scan and passes', async () => {
    const res = await world.proxy(agent.key, 'GET', '/proxy/ct/empty-png');
    expect(res.status).toBe(200);
  });

  it('unscannable_responses: pass returns the bytes unscanned, and the audit entry says so', async () => {
    const res = await fetch(`${world.svc.gatewayUrl}/proxy/ct-pass/png`, { headers: { authorization: `Bearer ${agent.key}` } });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(PNG)).toBe(true);
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry.reasons).toContain('redaction: response passed unscanned (image/png)');
  });

  it('with nothing asking for redaction the default is pass (audited)', async () => {
    const res = await world.proxy(agent.key, 'GET', '/proxy/ct-off/pdf');
    expect(res.status).toBe(200);
    const entry = await oneAuditEntry(world, res.headers.get('x-request-id'));
    expect(entry.reasons).toContain('redaction: response passed unscanned (application/pdf)');
  });

  it('an explicit refuse holds even when nothing asks for redaction', async () => {
    const res = await world.proxy(agent.key, 'GET', '/proxy/ct-refuse-off/pdf');
    expect(res.status).toBe(502);
    expect(res.json).toMatchObject({ error: 'unscannable_response' });
  });

  it('a redact_columns obligation asks for redaction too', async () => {
    await world.policy({ name: 'columns on ct-off', conditions: { source_ids: ['ct-off'] }, actions: { effect: 'allow', redact_columns: ['secret_notes'] } });
    const res = await world.proxy(agent.key, 'GET', '/proxy/ct-off/zip');
    expect(res.status).toBe(502);
  });

  it('an invalid setting is refused at registration', async () => {
    const res = await world.admin('POST', '/api/data-sources', { name: 'bad', source_type: 'http', connection_config: { base_url: up.base, unscannable_responses: 'maybe' } });
    expect(res.status).toBe(422);
    expect(JSON.stringify(res.json.detail[0].loc)).toBe(JSON.stringify(['body', 'connection_config', 'unscannable_responses']));
  });
});
