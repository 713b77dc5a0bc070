// runStages runs synchronous stages without a microtask turn between them, awaits the ones that return a promise, and ends on the first outcome or error with the audit fields recorded either way.
import { describe, expect, it } from 'vitest';
import { runStages } from '../../src/pipeline/run.js';
import type { GovernedRequest, Stage as PipelineStage, StageOutcome } from '../../src/pipeline/context.js';

type Stage = PipelineStage<GovernedRequest, unknown>;

function request(): GovernedRequest & { recorded: Record<string, unknown>[] } {
  const recorded: Record<string, unknown>[] = [];
  const audit = { set: (fields: Record<string, unknown>) => recorded.push(fields) };
  return { channel: 'http', requestId: 'r1', clientIp: null, sourceId: 's1', credential: { kind: 'bearer', authorization: undefined }, action: { kind: 'sql', sql: 'select 1', params: [] }, audit, recorded } as never;
}

const queued: StageOutcome = { kind: 'queued', approval: { id: 1, state: 'pending', expires_at: '2026-01-01T00:00:00.000Z' } };

describe('runStages', () => {
  it('runs synchronous stages back to back and awaits asynchronous ones, in order', async () => {
    const order: string[] = [];
    const sync = (name: string): Stage => ({ name, run: () => void order.push(name) });
    const later: Stage = { name: 'async', run: async () => void order.push('async') };
    const run = runStages([sync('a'), sync('b'), later, sync('c')], request(), {});
    // A microtask queued now runs only after the first promise the run awaits: sync stages do not yield.
    void Promise.resolve().then(() => order.push('microtask'));
    await run;
    expect(order.slice(0, 3)).toEqual(['a', 'b', 'async']);
    expect(order).toContain('c');
    expect(order.indexOf('c')).toBeGreaterThan(order.indexOf('async'));
  });

  it('ends on the first outcome, sync or async, and skips the rest', async () => {
    const ran: string[] = [];
    const after: Stage = { name: 'after', run: () => void ran.push('after') };
    await expect(runStages([{ name: 'q', run: () => queued }, after], request(), {})).resolves.toBe(queued);
    await expect(runStages([{ name: 'q', run: async () => queued }, after], request(), {})).resolves.toBe(queued);
    expect(ran).toEqual([]);
  });

  it('a synchronous throw rejects the run and the audit fields are still recorded', async () => {
    const req = request();
    const boom: Stage = {
      name: 'boom',
      run: () => {
        throw new Error('refused');
      },
    };
    await expect(runStages([boom], req, {})).rejects.toThrow('refused');
    expect(req.recorded).toHaveLength(1);
    expect(req.recorded[0]).toMatchObject({ source_id: 's1' });
  });
});
