// SSRF through the real egress dispatcher against a real loopback upstream: every blocked host form is refused before connecting, the private-egress setting lifts only overridable ranges, DNS answers are all checked and resolved once per connection (no rebinding).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEgressDispatcher } from '../../src/egress/agent.js';
import type { EgressDecision, EgressLookup, ResolvedAddress } from '../../src/egress/agent.js';
import { EgressDeniedError } from '../../src/egress/errors.js';
import { upstreamRequest } from '../../src/egress/request.js';
import { addressCases } from './address-table.js';
import { startUpstream } from './upstream-server.js';
import type { TestUpstream } from './upstream-server.js';

const PRIVATE_OK = 'private-ok';
const PUBLIC_ONLY = 'public-only';

let v4: TestUpstream;
let v6: TestUpstream;
beforeAll(async () => {
  v4 = await startUpstream({});
  v6 = await startUpstream({}, '::1');
});
afterAll(async () => {
  await v4.close();
  await v6.close();
});

/** A scripted resolver: each name answers from its list of answer sets, one set per call (last one repeats). */
function scriptedLookup(script: Record<string, ResolvedAddress[][]>) {
  const calls: string[] = [];
  const lookup: EgressLookup = async (hostname) => {
    calls.push(hostname);
    const sets = script[hostname];
    if (sets === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    const n = calls.filter((c) => c === hostname).length;
    return sets[Math.min(n, sets.length) - 1]!;
  };
  return { lookup, calls };
}

function dispatcherWith(lookup?: EgressLookup, decisions?: EgressDecision[]) {
  return createEgressDispatcher({
    allowPrivate: (sourceId) => sourceId === PRIVATE_OK,
    connectTimeoutMs: 1000,
    ...(lookup === undefined ? {} : { lookup }),
    ...(decisions === undefined ? {} : { onDecision: (d: EgressDecision) => decisions.push(d) }),
  });
}

const portFor = (host: string) => (host === '[::1]' ? v6.port : v4.port);
const get = (dispatcher: ReturnType<typeof createEgressDispatcher>, sourceId: string, url: string) =>
  upstreamRequest({ dispatcher, url: new URL(url), method: 'GET', headers: {}, sourceId, timeoutMs: 2000, maxResponseBytes: 1 << 20 });

describe('address table through the real dispatcher', () => {
  const dispatcher = dispatcherWith();
  afterAll(() => dispatcher.close());
  const blocked = addressCases.filter((c) => !c.allowed && c.urlValid !== false);

  it.each(blocked.map((c) => [c.host, c] as const))('refuses %s without the private-egress setting, before connecting', async (_h, c) => {
    const before = v4.hits.length + v6.hits.length;
    const err = await get(dispatcher, PUBLIC_ONLY, `http://${c.host}:${portFor(c.host)}/x`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EgressDeniedError);
    const denied = err as EgressDeniedError;
    expect(denied.code).toBe('egress_denied');
    expect(denied.range).toBe(c.range);
    // The client-facing message never names the internal address; the log field does.
    expect(denied.message).toBe('The upstream target is not allowed.');
    expect(v4.hits.length + v6.hits.length).toBe(before);
  });

  const reaching = addressCases.filter((c) => c.reachesLoopback === true);
  it.each(reaching.map((c) => [c.host, c] as const))('reaches the loopback upstream via %s only for a source the operator allowed', async (_h, c) => {
    const res = await get(dispatcher, PRIVATE_OK, `http://${c.host}:${portFor(c.host)}/via`);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString())).toEqual({ ok: true, path: '/via' });
  });

  it('never lifts metadata, link-local, unspecified, multicast, reserved or translated forms', async () => {
    const sticky = blocked.filter((c) => c.privateOverridable !== true);
    expect(sticky.length).toBeGreaterThan(30);
    for (const c of sticky) {
      const err = await get(dispatcher, PRIVATE_OK, `http://${c.host}:${v4.port}/x`).catch((e: unknown) => e);
      expect(err, c.host).toBeInstanceOf(EgressDeniedError);
    }
  });

  it('checks public and overridable rows exactly as a connection would (no connection made)', async () => {
    for (const c of addressCases.filter((r) => r.urlValid !== false)) {
      const hostname = new URL(`http://${c.host}/`).hostname.replace(/^\[|\]$/g, '');
      const expectAllowedPrivate = c.allowed || c.privateOverridable === true;
      const asPublic = await dispatcher.checkTarget(PUBLIC_ONLY, hostname).then(() => true, () => false);
      const asPrivate = await dispatcher.checkTarget(PRIVATE_OK, hostname).then(() => true, () => false);
      expect([c.host, asPublic, asPrivate]).toEqual([c.host, c.allowed, expectAllowedPrivate]);
    }
  });

  it('keeps separate pools per source: a connection admitted for one source is not reused by another', async () => {
    const d = dispatcherWith();
    try {
      expect((await get(d, PRIVATE_OK, `http://127.0.0.1:${v4.port}/a`)).status).toBe(200);
      await expect(get(d, PUBLIC_ONLY, `http://127.0.0.1:${v4.port}/a`)).rejects.toBeInstanceOf(EgressDeniedError);
    } finally {
      await d.close();
    }
  });
});

describe('DNS answers', () => {
  it('refuses a name that resolves to a private or loopback address, and reaches it only with the setting', async () => {
    const { lookup } = scriptedLookup({ 'internal.test': [[{ address: '10.1.2.3', family: 4 }]], 'loop.test': [[{ address: '127.0.0.1', family: 4 }]] });
    const decisions: EgressDecision[] = [];
    const d = dispatcherWith(lookup, decisions);
    try {
      const before = v4.hits.length;
      const e1 = await get(d, PUBLIC_ONLY, `http://internal.test:${v4.port}/`).catch((e: unknown) => e);
      expect(e1).toBeInstanceOf(EgressDeniedError);
      expect(e1).toMatchObject({ range: 'private', hostname: 'internal.test', address: '10.1.2.3' });
      await expect(get(d, PUBLIC_ONLY, `http://loop.test:${v4.port}/`)).rejects.toMatchObject({ code: 'egress_denied', range: 'loopback' });
      expect(v4.hits.length).toBe(before);

      const ok = await get(d, PRIVATE_OK, `http://loop.test:${v4.port}/named`);
      expect(ok.status).toBe(200);
      // The upstream sees the original name (virtual hosting works) although the socket went to the checked address.
      expect(v4.hits.at(-1)).toMatchObject({ path: '/named', host: `loop.test:${v4.port}` });
      expect(decisions.at(-1)).toMatchObject({ sourceId: PRIVATE_OK, hostname: 'loop.test', address: '127.0.0.1', allowed: true, privateOverride: true });
    } finally {
      await d.close();
    }
  });

  it('refuses a name whose answers mix a public and a loopback address (every answer is checked)', async () => {
    for (const answers of [
      [{ address: '93.184.216.34', family: 4 }, { address: '127.0.0.1', family: 4 }],
      [{ address: '2606:4700::1111', family: 6 }, { address: '::1', family: 6 }],
      [{ address: '93.184.216.34', family: 4 }, { address: '::ffff:169.254.169.254', family: 6 }],
    ]) {
      const { lookup } = scriptedLookup({ 'mixed.test': [answers] });
      const d = dispatcherWith(lookup);
      const before = v4.hits.length;
      await expect(get(d, PUBLIC_ONLY, `http://mixed.test:${v4.port}/`)).rejects.toBeInstanceOf(EgressDeniedError);
      expect(v4.hits.length).toBe(before);
      await d.close();
    }
  });

  // No test here ever dials a non-loopback address: public answers are only checked (checkTarget), never connected to.
  it('DNS rebinding: a public answer checked earlier is not reused — the connection resolves again, sees loopback and is refused', async () => {
    const { lookup, calls } = scriptedLookup({ 'rebind.test': [[{ address: '93.184.216.34', family: 4 }], [{ address: '127.0.0.1', family: 4 }]] });
    const decisions: EgressDecision[] = [];
    const d = dispatcherWith(lookup, decisions);
    try {
      const before = v4.hits.length;
      const first = await d.checkTarget(PUBLIC_ONLY, 'rebind.test');
      expect(first.address).toBe('93.184.216.34');
      await expect(get(d, PUBLIC_ONLY, `http://rebind.test:${v4.port}/secret`)).rejects.toMatchObject({ code: 'egress_denied', range: 'loopback' });
      expect(calls).toEqual(['rebind.test', 'rebind.test']);
      expect(v4.hits.length).toBe(before);
    } finally {
      await d.close();
    }
  });

  it('DNS rebinding: each connection connects to the address it checked, and a rebind to the metadata range is refused even with private egress', async () => {
    const { lookup, calls } = scriptedLookup({ 'rebind.test': [[{ address: '127.0.0.1', family: 4 }], [{ address: '169.254.169.254', family: 4 }]] });
    const decisions: EgressDecision[] = [];
    const d = dispatcherWith(lookup, decisions);
    try {
      const before = v4.hits.length;
      const ok = await get(d, PRIVATE_OK, `http://rebind.test:${v4.port}/first`);
      expect(ok.status).toBe(200);
      expect(v4.hits.length).toBe(before + 1);
      expect(decisions.filter((x) => x.allowed).map((x) => x.address)).toEqual(['127.0.0.1']);
      // A fresh connection (the pool is dropped) resolves once more; the rebound answer is what gets checked.
      await d.evict(PRIVATE_OK);
      await expect(get(d, PRIVATE_OK, `http://rebind.test:${v4.port}/second`)).rejects.toMatchObject({ code: 'egress_denied' });
      expect(calls).toEqual(['rebind.test', 'rebind.test']);
      expect(v4.hits.length).toBe(before + 1);
    } finally {
      await d.close();
    }
  });

  it('precheck reuses an allowed answer (no DNS lookup per request) but never a refusal, and connections still resolve and check again', async () => {
    const { lookup, calls } = scriptedLookup({
      'pre.test': [[{ address: '127.0.0.1', family: 4 }], [{ address: '127.0.0.1', family: 4 }], [{ address: '169.254.169.254', family: 4 }]],
      'bad.test': [[{ address: '10.0.0.1', family: 4 }]],
    });
    const d = dispatcherWith(lookup);
    try {
      await d.precheck(PRIVATE_OK, 'pre.test');
      await d.precheck(PRIVATE_OK, 'pre.test');
      expect(calls).toEqual(['pre.test']);
      // A connection resolves on its own: the memoized precheck does not decide what it connects to.
      expect((await get(d, PRIVATE_OK, `http://pre.test:${v4.port}/pre`)).status).toBe(200);
      expect(calls).toEqual(['pre.test', 'pre.test']);
      await d.evict(PRIVATE_OK);
      await expect(get(d, PRIVATE_OK, `http://pre.test:${v4.port}/pre`)).rejects.toMatchObject({ code: 'egress_denied' });

      await expect(d.precheck(PUBLIC_ONLY, 'bad.test')).rejects.toMatchObject({ code: 'egress_denied' });
      await expect(d.precheck(PUBLIC_ONLY, 'bad.test')).rejects.toMatchObject({ code: 'egress_denied' });
      expect(calls.filter((c) => c === 'bad.test')).toHaveLength(2);
    } finally {
      await d.close();
    }
  });

  it('reports unknown names as a safe upstream failure, not as a denial', async () => {
    const { lookup } = scriptedLookup({});
    const d = dispatcherWith(lookup);
    try {
      await expect(get(d, PUBLIC_ONLY, 'http://nowhere.test/')).rejects.toMatchObject({ code: 'upstream_failed', reason: 'host not found' });
    } finally {
      await d.close();
    }
  });

  it('bounds a resolver that never answers by the connect timeout', async () => {
    const d = createEgressDispatcher({ allowPrivate: () => false, connectTimeoutMs: 200, lookup: () => new Promise(() => undefined) });
    try {
      const started = performance.now();
      await expect(get(d, PUBLIC_ONLY, 'http://slow-dns.test/')).rejects.toMatchObject({ code: 'upstream_failed', reason: 'timed out' });
      expect(performance.now() - started).toBeLessThan(1500);
    } finally {
      await d.close();
    }
  });
});
