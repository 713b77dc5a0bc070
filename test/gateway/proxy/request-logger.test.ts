// The proxy's per-request logger is made on first use: requests that log nothing build no pino child, and a failure still logs with the request's bindings.
import { describe, expect, it } from 'vitest';
import type { FastifyBaseLogger } from 'fastify';
import { LazyRequestLogger } from '../../../src/gateway/proxy/route.js';

function recordingParent() {
  const children: { bindings: object; lines: unknown[][] }[] = [];
  const parent = {
    child(bindings: object) {
      const lines: unknown[][] = [];
      children.push({ bindings, lines });
      const log = (...args: unknown[]) => void lines.push(args);
      return { level: 'info', info: log, warn: log, error: log, debug: log, fatal: log, trace: log, silent: log, child: () => parent } as unknown as FastifyBaseLogger;
    },
  } as unknown as FastifyBaseLogger;
  return { parent, children };
}

describe('LazyRequestLogger', () => {
  it('makes no child until something is logged, then one child with the request bindings', () => {
    const { parent, children } = recordingParent();
    const log = new LazyRequestLogger(parent, { reqId: 'req-1' }, {});
    expect(children).toHaveLength(0);
    log.error({ err: 'boom' }, 'proxy request failed');
    log.warn('again');
    expect(children).toHaveLength(1);
    expect(children[0]!.bindings).toEqual({ reqId: 'req-1' });
    expect(children[0]!.lines).toEqual([[{ err: 'boom' }, 'proxy request failed'], ['again']]);
    expect(log.level).toBe('info');
  });
});
