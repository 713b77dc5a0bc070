// Per-source circuit breakers: N consecutive upstream failures open a source's circuit (503 without calling upstream), it half-opens after the delay and closes on a successful probe; decisions of the gateway itself never count.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEgressDispatcher } from '../../src/egress/agent.js';
import { CircuitRegistry } from '../../src/egress/circuit.js';
import { CircuitOpenError, EgressDeniedError, ResponseTooLargeError, UpstreamError } from '../../src/egress/errors.js';
import { upstreamRequest } from '../../src/egress/request.js';
import { startUpstream } from './upstream-server.js';
import type { TestUpstream } from './upstream-server.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fail = () => Promise.reject(new UpstreamError('connection refused'));

describe('CircuitRegistry', () => {
  it('opens after the threshold, refuses without calling, half-opens, closes on a good probe', async () => {
    const circuits = new CircuitRegistry({ failureThreshold: 3, halfOpenAfterMs: 500 });
    const c = circuits.for('s1');
    let calls = 0;
    const counted = () => {
      calls++;
      return fail();
    };
    for (let i = 0; i < 3; i++) await expect(c.execute(counted)).rejects.toBeInstanceOf(UpstreamError);
    expect(c.state).toBe('open');
    const open = await c.execute(counted).catch((e: unknown) => e);
    expect(open).toBeInstanceOf(CircuitOpenError);
    expect(open).toMatchObject({ code: 'unavailable', sourceId: 's1', retryAfterSeconds: 1 });
    expect(calls).toBe(3);

    await sleep(600);
    expect(c.state).toBe('half_open');
    await expect(c.execute(async () => ({ status: 200 }))).resolves.toEqual({ status: 200 });
    expect(c.state).toBe('closed');
  });

  it('reopens when the half-open probe fails', async () => {
    const c = new CircuitRegistry({ failureThreshold: 1, halfOpenAfterMs: 400 }).for('s');
    await expect(c.execute(fail)).rejects.toBeInstanceOf(UpstreamError);
    await sleep(450);
    await expect(c.execute(fail)).rejects.toBeInstanceOf(UpstreamError);
    expect(c.state).toBe('open');
    await expect(c.execute(async () => 1)).rejects.toBeInstanceOf(CircuitOpenError);
  });

  it('counts 5xx answers (returned to the caller) but not 4xx; a success resets the count', async () => {
    const c = new CircuitRegistry({ failureThreshold: 2, halfOpenAfterMs: 10_000 }).for('s');
    await expect(c.execute(async () => ({ status: 503 }))).resolves.toEqual({ status: 503 });
    await expect(c.execute(async () => ({ status: 200 }))).resolves.toEqual({ status: 200 });
    await c.execute(async () => ({ status: 500 }));
    for (let i = 0; i < 5; i++) await c.execute(async () => ({ status: 404 }));
    expect(c.state).toBe('closed');
    await c.execute(async () => ({ status: 500 }));
    await c.execute(async () => ({ status: 502 }));
    expect(c.state).toBe('open');
  });

  it('does not count the gateway’s own refusals (egress denial, size limit, bad encoding)', async () => {
    const c = new CircuitRegistry({ failureThreshold: 1, halfOpenAfterMs: 10_000 }).for('s');
    await expect(c.execute(() => Promise.reject(new EgressDeniedError({ range: 'loopback', hostname: 'x', address: '127.0.0.1' })))).rejects.toBeInstanceOf(EgressDeniedError);
    await expect(c.execute(() => Promise.reject(new ResponseTooLargeError(10, 'body')))).rejects.toBeInstanceOf(ResponseTooLargeError);
    await expect(c.execute(() => Promise.reject(new UpstreamError('unsupported content encoding')))).rejects.toBeInstanceOf(UpstreamError);
    expect(c.state).toBe('closed');
  });

  it('keeps sources independent', async () => {
    const circuits = new CircuitRegistry({ failureThreshold: 1, halfOpenAfterMs: 10_000 });
    await expect(circuits.for('bad').execute(fail)).rejects.toBeInstanceOf(UpstreamError);
    expect(circuits.state('bad')).toBe('open');
    expect(circuits.state('good')).toBe('closed');
    await expect(circuits.for('good').execute(async () => 'ok')).resolves.toBe('ok');
    expect(circuits.states()).toEqual({ bad: 'open', good: 'closed' });
    circuits.delete('bad');
    expect(circuits.state('bad')).toBe('closed');
  });

  it('checks its options', () => {
    expect(() => new CircuitRegistry({ failureThreshold: 0, halfOpenAfterMs: 10 })).toThrow(TypeError);
    expect(() => new CircuitRegistry({ failureThreshold: 1, halfOpenAfterMs: 0 })).toThrow(TypeError);
  });
});

describe('circuit around real upstream requests', () => {
  let up: TestUpstream;
  let healthy = false;
  const dispatcher = createEgressDispatcher({ allowPrivate: () => true, connectTimeoutMs: 500 });
  beforeAll(async () => {
    up = await startUpstream({ '/flaky': (_req, res) => (healthy ? res.end('fine') : res.writeHead(500).end('boom')) });
  });
  afterAll(async () => {
    await dispatcher.close();
    await up.close();
  });

  it('opens on refused connections and on 5xx, then recovers through a half-open probe', async () => {
    const circuits = new CircuitRegistry({ failureThreshold: 2, halfOpenAfterMs: 150 });
    const closed = await startUpstream({});
    const deadPort = closed.port;
    await closed.close();
    const dead = () => upstreamRequest({ dispatcher, url: new URL(`http://127.0.0.1:${deadPort}/`), method: 'GET', headers: {}, sourceId: 'dead', timeoutMs: 1000, maxResponseBytes: 1000 });
    await expect(circuits.for('dead').execute(dead)).rejects.toMatchObject({ reason: 'connection refused' });
    await expect(circuits.for('dead').execute(dead)).rejects.toMatchObject({ reason: 'connection refused' });
    await expect(circuits.for('dead').execute(dead)).rejects.toBeInstanceOf(CircuitOpenError);

    const flaky = () => upstreamRequest({ dispatcher, url: new URL(`http://127.0.0.1:${up.port}/flaky`), method: 'GET', headers: {}, sourceId: 'flaky', timeoutMs: 1000, maxResponseBytes: 1000 });
    expect((await circuits.for('flaky').execute(flaky)).status).toBe(500);
    expect((await circuits.for('flaky').execute(flaky)).status).toBe(500);
    const hitsWhenOpened = up.hits.length;
    await expect(circuits.for('flaky').execute(flaky)).rejects.toBeInstanceOf(CircuitOpenError);
    expect(up.hits.length).toBe(hitsWhenOpened);
    healthy = true;
    await sleep(200);
    expect((await circuits.for('flaky').execute(flaky)).status).toBe(200);
    expect(circuits.state('flaky')).toBe('closed');
  });
});
