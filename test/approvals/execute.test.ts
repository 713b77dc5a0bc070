// The executor's edges without a service: results bounded by approvals.max_result_bytes, an unreadable payload never executes, SQL without a registered executor fails "no SQL executor".
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { createLogger } from '../../src/observability/logger.js';
import { PayloadCipher } from '../../src/approvals/crypto.js';
import { ApprovalExecutor, boundedHttpResult, idempotencyKeyOf, type SqlApprovalExecutor } from '../../src/approvals/execute.js';
import type { ApprovalRow } from '../../src/approvals/store.js';
import type { AgentIdentity } from '../../src/identity/index.js';

const log = createLogger({ level: 'silent', service: 'test', role: 'test' });
const cipher = new PayloadCipher('test-key-1');
const identity: AgentIdentity = { id: 3, name: 'a', roles: [], team: null, mapped_pg_role: null, enabled: true, grant_version: 1, auth_version: 1 };
const row = { id: 9, identity_id: 3, source_id: 'db', status: 'approved' } as ApprovalRow;
const sqlPayload = cipher.encrypt(Buffer.from(JSON.stringify({ kind: 'sql', sql: 'delete from t where id = $1', params: ['1'] })));

function executor(sql: SqlApprovalExecutor | null, maxResultBytes = 4096) {
  // The HTTP pipeline and auditor are not reached on these paths.
  return new ApprovalExecutor({ cipher, pipeline: {} as never, auditor: {} as never, log, maxResultBytes, sqlExecutor: () => sql });
}

describe('ApprovalExecutor', () => {
  it('the Idempotency-Key is derived from the approval id', () => {
    expect(idempotencyKeyOf(12)).toBe('gatehouse-approval-12');
  });

  it('a payload under another key (or tampered) is not executed: failed payload_unreadable', async () => {
    let called = 0;
    const sql: SqlApprovalExecutor = { execute: async () => (called++, { command: 'DELETE', row_count: 1, columns: [], rows: [], truncated: false }) };
    const other = new PayloadCipher('another-key').encrypt(Buffer.from('{"kind":"sql","sql":"x","params":[]}'));
    expect(await executor(sql).run(row, other, identity)).toEqual({ status: 'failed', result: { error: 'payload_unreadable', message: expect.any(String) } });
    const tampered = Buffer.from(sqlPayload);
    tampered[tampered.length - 1]! ^= 1;
    expect((await executor(sql).run(row, tampered, identity)).status).toBe('failed');
    expect(called).toBe(0);
  });

  it('SQL with no executor registered: failed, not executed', async () => {
    const outcome = await executor(null).run(row, sqlPayload, identity);
    expect(outcome.status).toBe('failed');
    expect(outcome.result).toMatchObject({ error: 'unavailable', message: expect.stringContaining('No SQL executor') });
  });

  it('SQL with an executor: its bounded result is recorded; an over-budget one keeps the summary only', async () => {
    const seen: unknown[] = [];
    const small: SqlApprovalExecutor = { execute: async (r) => (seen.push(r), { command: 'DELETE', row_count: 1, columns: ['id'], rows: [[1]], truncated: false }) };
    expect(await executor(small).run(row, sqlPayload, identity)).toEqual({ status: 'executed', result: { command: 'DELETE', row_count: 1, columns: ['id'], rows: [[1]], truncated: false } });
    expect(seen[0]).toMatchObject({ approvalId: 9, identity, sourceId: 'db', sql: 'delete from t where id = $1', params: ['1'], maxResultBytes: 4096 });
    const big: SqlApprovalExecutor = { execute: async () => ({ command: 'SELECT', row_count: 500, columns: ['x'], rows: Array.from({ length: 500 }, () => ['x'.repeat(100)]), truncated: false }) };
    expect((await executor(big, 1024).run(row, sqlPayload, identity)).result).toMatchObject({ command: 'SELECT', rows: [], truncated: true });
  });

  it('an executor refusal becomes failed with its code', async () => {
    const { GatehouseError } = await import('../../src/errors/registry.js');
    const refusing: SqlApprovalExecutor = { execute: async () => Promise.reject(new GatehouseError('forbidden', 'No source role allows this request.')) };
    expect(await executor(refusing).run(row, sqlPayload, identity)).toEqual({ status: 'failed', result: { error: 'forbidden', message: 'No source role allows this request.' } });
  });
});

describe('boundedHttpResult', () => {
  it('always fits max_result_bytes and says when the body was cut', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 5000 }), fc.integer({ min: 300, max: 4000 }), fc.boolean(), (text, max, json) => {
        const body = Buffer.from(text);
        const r = boundedHttpResult({ status: 201, headers: { 'content-type': json ? 'application/json' : 'application/octet-stream' }, body }, max);
        expect(Buffer.byteLength(JSON.stringify(r))).toBeLessThanOrEqual(max);
        if (!r.truncated) expect(Buffer.from(r.body as string, json ? 'utf8' : 'base64').equals(body)).toBe(true);
        else expect(body.length).toBeGreaterThan(0);
        expect(r.body_bytes).toBe(body.length);
      }),
      { numRuns: 200 },
    );
  });
});
