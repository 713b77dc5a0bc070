// The path-attack table through the real route: each row's base URL is moved onto a loopback upstream; refused rows answer 400 without reaching it, allowed rows reach it with the expected path.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../../support/world.js';
import { DEFAULT_BASE_URL, DEFAULT_SOURCE_ID, pathCases, type PathCase } from './path-table.js';
import { oneAuditEntry, startRecordingUpstream, type RecordingUpstream } from './support.js';

let world: World;
let up: RecordingUpstream;
let reader: { key: string };

/** Same path and base path, on the loopback upstream; `null` for rows whose base URL is itself the invalid input. */
function loopbackBase(c: PathCase, port: number): string | null {
  try {
    const u = new URL(c.baseUrl ?? DEFAULT_BASE_URL);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    if (u.username || u.password) return null;
    return `http://127.0.0.1:${port}${u.pathname}`;
  } catch {
    return null;
  }
}

const expectedUpstreamPath = (c: PathCase & { expect: { ok: true } }) => new URL(c.expect.url).pathname;

/** A raw HTTP/1.1 exchange for targets node:http refuses to send; returns the status code. */
function rawSocketStatus(port: number, target: string, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(Buffer.from(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`, 'utf8'));
    });
    let data = '';
    socket.on('data', (c: Buffer) => (data += c.toString('latin1')));
    socket.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)));
    socket.on('error', reject);
  });
}

// Every source the table uses, with the base its rows expect.
const sources = new Map<string, string | null>();

beforeAll(async () => {
  up = await startRecordingUpstream();
  const groups = new Map<string, PathCase>();
  for (const c of pathCases) {
    const key = `${c.sourceId ?? DEFAULT_SOURCE_ID}|${c.baseUrl ?? DEFAULT_BASE_URL}`;
    if (!groups.has(key)) groups.set(key, c);
  }
  let n = 0;
  for (const [key, c] of groups) {
    const base = loopbackBase(c, up.port);
    sources.set(key, base === null ? null : `p${n++}`);
  }
  world = await startWorld({ privateSources: [...sources.values()].filter((v): v is string => v !== null), env: { SERVICE_AUDIT__DURABILITY_MODE: 'buffered' } });
  const grants: { source_id: string; role_key: string }[] = [];
  for (const [key, id] of sources) {
    if (id === null) continue;
    const c = groups.get(key)!;
    await world.httpSource(id, loopbackBase(c, up.port)!);
    grants.push({ source_id: id, role_key: 'reader' });
  }
  reader = await world.agent('path-reader', grants);
  // Rows that resolve to the same upstream path must each reach the upstream, not the governed cache.
  await world.policy({ name: 'no cache', conditions: { source_ids: ['*'] }, actions: { effect: 'allow', cache: false } });
}, 60_000);

afterAll(async () => {
  await world?.stop();
  await up?.close();
});

/** The row's target with its source id replaced by the loopback source standing in for it. */
function routedTarget(c: PathCase): string | null {
  const sourceId = c.sourceId ?? DEFAULT_SOURCE_ID;
  const id = sources.get(`${sourceId}|${c.baseUrl ?? DEFAULT_BASE_URL}`);
  if (!id) return null;
  const prefix = `/proxy/${sourceId}`;
  if (!c.rawUrl.startsWith(prefix)) return c.rawUrl;
  return `/proxy/${id}${c.rawUrl.slice(prefix.length)}`;
}

describe('path-attack table through the proxy route', () => {
  it('has at least 60 rows', () => {
    expect(pathCases.length).toBeGreaterThanOrEqual(60);
  });

  const wireRows = pathCases.filter((c) => c.wireSafe !== false);
  const unsendable = pathCases.filter((c) => c.wireSafe === false);

  it.each(wireRows.map((c) => [c.name, c] as const))('%s', async (_n, c) => {
    const target = routedTarget(c);
    const before = up.received.length;
    if (target === null) {
      // The base URL itself is invalid (userinfo, non-http, relative): the admin API refuses such a source, so nothing can be proxied to it.
      const created = await world.admin('POST', '/api/data-sources', { name: 'bad', source_id: `bad-${pathCases.indexOf(c)}`, source_type: 'http', connection_config: { base_url: c.baseUrl } });
      expect(created.status).toBe(422);
      return;
    }
    const res = await world.rawProxy(reader.key, 'GET', target);
    if (c.expect.ok) {
      expect(res.status, `${target} → ${res.text}`).toBe(200);
      expect(up.received.length).toBe(before + 1);
      const got = up.received.at(-1)!;
      expect(got.path).toBe(expectedUpstreamPath(c as PathCase & { expect: { ok: true } }));
      if (c.expect.query) expect(got.query).toBe(c.expect.query);
    } else if (c.expect.reason === 'source_mismatch' || !target.startsWith('/proxy/')) {
      // Through the route these name another source, or no proxy route at all: nothing is proxied.
      expect([400, 404], `${target} → ${res.text}`).toContain(res.status);
      expect(['unknown_source', 'not_found', 'invalid_path']).toContain(res.json?.error);
      expect(up.received.length).toBe(before);
    } else {
      expect(res.status, `${target} → ${res.text}`).toBe(400);
      expect(res.json, res.text).toMatchObject({ error: 'invalid_path', request_id: res.headers.get('x-request-id') });
      expect(res.text).not.toContain(c.rawUrl.slice(10));
      expect(up.received.length).toBe(before);
      expect((await oneAuditEntry(world, res.headers.get('x-request-id'))).status).toBe(400);
    }
  });

  it.each(unsendable.map((c) => [c.name, c] as const))('%s (raw socket) → 400, upstream not reached', async (_n, c) => {
    const target = routedTarget(c) ?? c.rawUrl;
    const before = up.received.length;
    const port = Number(new URL(world.svc.gatewayUrl).port);
    const status = await rawSocketStatus(port, target, reader.key);
    if (target.includes('\r\n')) {
      // CRLF ends the request line on the wire: what remains is a plain request whose injected "Host" line is a gateway-side header, never forwarded.
      for (const r of up.received.slice(before)) expect(r.headers.host).toBe(`127.0.0.1:${up.port}`);
      expect(JSON.stringify(up.received.slice(before))).not.toContain('evil');
      return;
    }
    expect(status === 400 || status === 404, `status ${status}`).toBe(true);
    expect(up.received.length).toBe(before);
  });
});
