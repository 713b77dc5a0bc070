// The per-request emitter: one entry per request (second end ignored and logged), abort handling, and secret masking in admin changes.
import { describe, expect, it } from 'vitest';
import { Auditor, CLIENT_CLOSED_STATUS } from '../../src/audit/context.js';
import { MemoryAuditSink } from '../../src/audit/port.js';
import { assertValidEntry, auditChanges, newAuditId, sanitizeChanges } from '../../src/audit/entry.js';
import { AuditWriter } from '../../src/audit/writer.js';
import { withMigratedStore } from '../support/pg.js';
import { AlwaysOnSampler, InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { Tracing } from '../../src/observability/tracing.js';
import { auditConfig, recordingLogger, tempSpoolDir } from './support.js';

describe('AuditContext', () => {
  it('emits exactly one entry; a second end is a logged no-op; set after end is refused', async () => {
    const sink = new MemoryAuditSink();
    const logger = recordingLogger();
    const auditor = new Auditor({ port: sink, logger });
    const audit = auditor.begin({ channel: 'http', request_id: 'r1', identity_id: 5 });
    audit.set({ source_id: 'orders', decision: 'allow' }).addReason('grant:reader');
    await audit.end({ status: 200, bytes_out: 10 });
    await audit.end({ status: 500 });
    await audit.endOnAbort();
    audit.set({ status: 418 });
    expect(sink.entries).toHaveLength(1);
    const [entry] = sink.entries;
    expect(entry).toMatchObject({ id: audit.id, ts: audit.ts, status: 200, identity_id: 5, source_id: 'orders', reasons: ['grant:reader'], decision: 'allow' });
    expect(entry!.duration_ms).toBeGreaterThanOrEqual(0);
    assertValidEntry(entry!);
    expect(logger.records.filter((r) => r.level === 'error')).toHaveLength(2);
  });

  it('endOnAbort records a client disconnect once', async () => {
    const sink = new MemoryAuditSink();
    const audit = new Auditor({ port: sink, logger: recordingLogger() }).begin({ channel: 'mcp', request_id: 'r2' });
    await audit.endOnAbort();
    expect(sink.entries[0]).toMatchObject({ status: CLIENT_CLOSED_STATUS, decision: 'error', error_code: 'client_closed' });
  });

  it('ids are UUIDv7 ordered by creation time', () => {
    const a = newAuditId(1_000);
    const b = newAuditId(2_000);
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(a < b).toBe(true);
  });

  it('rejects malformed entries before they can poison a batch', () => {
    const sink = new MemoryAuditSink();
    const audit = new Auditor({ port: sink, logger: recordingLogger() }).begin({ channel: 'http', request_id: 'r3' });
    expect(() => assertValidEntry({ ...audit.snapshot(), channel: 'smtp' as never })).toThrow(TypeError);
    expect(() => assertValidEntry({ ...audit.snapshot(), status: -1 })).toThrow(/status/);
    // Every checked field is named when it is wrong.
    const wrong: Record<string, unknown> = {
      identity_id: 1.5, admin_user_id: 'x', approval_id: -0.5, upstream_status: '200', redactions: -1, bytes_in: 1.5, bytes_out: null,
      source_id: 5, operation: 'x'.repeat(16_385), method: [], path: {}, sql_fingerprint: 1, sql_normalized: true, client_ip: 0, action: 1, error_code: 2,
      duration_ms: Number.NaN, tables: [1], reasons: 'r', policy_ids: [1.5],
    };
    for (const [field, value] of Object.entries(wrong)) {
      expect(() => assertValidEntry({ ...audit.snapshot(), [field]: value }), field).toThrow(new RegExp(`invalid ${field}$`));
    }
    expect(() => assertValidEntry(audit.snapshot())).not.toThrow();
  });

  it('an entry the writer refuses ends in a rejected promise and a logged error, never a throw from end()', async () => {
    const migrated = await withMigratedStore({ poolMax: 1 });
    const spool = await tempSpoolDir();
    const writer = new AuditWriter({ db: migrated.store.db, config: auditConfig({ durability_mode: 'buffered', spool: { dir: spool.dir } }), logger: recordingLogger() });
    try {
      const logger = recordingLogger();
      const audit = new Auditor({ port: writer, logger }).begin({ channel: 'pgwire', request_id: 'r4' });
      let ended: Promise<void> | undefined;
      expect(() => (ended = audit.end({ status: 2 ** 31 }))).not.toThrow();
      await expect(ended).rejects.toThrow(/invalid status/);
      expect(logger.records.some((r) => r.level === 'error' && r.msg === 'audit entry refused by the writer (bug)')).toBe(true);
      expect(writer.stats()).toMatchObject({ written: 0 });
    } finally {
      await writer.close();
      await spool.remove();
      await migrated.cleanup();
    }
  });
});

describe('AuditContext spans', () => {
  /** The real SDK with its in-memory exporter: what the OTLP exporter would have been handed. */
  function recordingTracing() {
    const exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({ sampler: new AlwaysOnSampler(), spanProcessors: [new SimpleSpanProcessor({ exporter })] });
    return { tracing: new Tracing(provider.getTracer('test'), 1), exporter };
  }

  it.each(['buffered', 'strict'] as const)('a proxied request in %s mode: the server span carries the request, an audit.write span only where the write waits', async (mode) => {
    const migrated = await withMigratedStore({ poolMax: 2 });
    const spool = await tempSpoolDir();
    const writer = new AuditWriter({ db: migrated.store.db, config: auditConfig({ durability_mode: mode, spool: { dir: spool.dir } }), logger: recordingLogger() });
    await writer.start();
    const { tracing, exporter } = recordingTracing();
    try {
      const auditor = new Auditor({ port: writer, logger: recordingLogger(), tracing });
      const server = tracing.startServer('GET /proxy/:source_id/*', {}, {});
      const audit = auditor.begin({ channel: 'http', request_id: `r-${mode}`, identity_id: 7 }, server);
      expect(audit.span).toBe(server);
      audit.startStageSpan('gatehouse.policy', performance.now())!.end();
      await audit.end({ status: 200, decision: 'allow', source_id: 'orders' });
      // The HTTP handler ends its server span on the response's close, never the audit context.
      expect(exporter.getFinishedSpans().map((s) => s.name)).not.toContain('GET /proxy/:source_id/*');
      server.end();
      const spans = exporter.getFinishedSpans();
      const names = spans.map((s) => s.name).sort();
      expect(names).toEqual(mode === 'strict' ? ['GET /proxy/:source_id/*', 'gatehouse.audit.write', 'gatehouse.policy'] : ['GET /proxy/:source_id/*', 'gatehouse.policy']);
      const serverSpan = spans.find((s) => s.name === 'GET /proxy/:source_id/*')!;
      expect(serverSpan.attributes).toMatchObject({ 'gatehouse.decision': 'allow', 'gatehouse.identity_id': 7, 'gatehouse.source_id': 'orders', 'gatehouse.status': 200 });
      for (const child of spans.filter((s) => s !== serverSpan)) expect(child.parentSpanContext?.spanId).toBe(serverSpan.spanContext().spanId);
    } finally {
      await writer.close();
      await spool.remove();
      await migrated.cleanup();
    }
  });

  it('a wire statement has a span of its own, ended with the entry', async () => {
    const { tracing, exporter } = recordingTracing();
    const audit = new Auditor({ port: new MemoryAuditSink(), logger: recordingLogger(), tracing }).begin({ channel: 'pgwire', request_id: 'w1' });
    await audit.end({ status: 200, decision: 'allow' });
    await new Promise((r) => setImmediate(r));
    expect(exporter.getFinishedSpans().map((s) => s.name).sort()).toEqual(['gatehouse.audit.write', 'gatehouse.pgwire.statement']);
  });
});

describe('sanitizeChanges', () => {
  it('masks credentials at any depth, keeps references and harmless fields', () => {
    const before = {
      name: 'orders',
      connection_config: { host: 'db', password: 'hunter2', password_ref: 'env:PG_PW', url: 'postgres://u:pw@db/x', sslmode: 'verify-full' },
      api_key: 'gh_live_abc',
      headers: [{ authorization: 'Bearer x' }],
      token: '',
      client_secret: null,
    };
    const out = sanitizeChanges(before) as typeof before;
    expect(out.connection_config).toEqual({ host: 'db', password: '****', password_ref: 'env:PG_PW', url: 'postgres://u:****@db/x', sslmode: 'verify-full' });
    expect(out.api_key).toBe('****');
    expect(out.headers[0]!.authorization).toBe('****');
    expect(out.token).toBe('');
    expect(out.client_secret).toBeNull();
    expect(JSON.stringify(auditChanges(before, { ...before, name: 'orders2' }))).not.toMatch(/hunter2|gh_live_abc|Bearer x|:pw@/);
  });

  it('masks URL credentials as the printed configuration does: userinfo password and credential query parameters', () => {
    expect(sanitizeChanges({ dsn_url: 'postgres://u@db/x?sslmode=require&password=hunter2' })).toEqual({ dsn_url: 'postgres://u@db/x?sslmode=require&password=****' });
    expect(sanitizeChanges(['redis://:pw@cache:6379/0', 'plain text: not a URL'])).toEqual(['redis://:****@cache:6379/0', 'plain text: not a URL']);
  });
});
