// The audit port every front door and admin action writes through, plus an in-memory sink for tests, benches and tooling.
import type { AuditEntry } from './entry.js';

export interface AuditHealth {
  ok: boolean;
  detail: string;
}

export interface AuditStats {
  mode: 'strict' | 'buffered' | 'memory';
  /** Entries accepted in memory, not yet in PostgreSQL or the spool. */
  buffered: number;
  buffer_capacity: number;
  spooled_entries: number;
  spooled_bytes: number;
  spool_max_bytes: number;
  /** Spool records found corrupted (bad checksum, truncated) and skipped. */
  spool_corrupt_records: number;
  /** Entries committed to PostgreSQL (directly or by replay; a replayed duplicate counts once). */
  written: number;
  /** Entries replayed from the spool into PostgreSQL. */
  replayed: number;
  /** Writes refused (strict: no sink; buffered fail_closed: buffer and spool full). */
  failed: number;
  /** Entries lost under fail_open strictness with buffer and spool full. */
  dropped: number;
  postgres_available: boolean;
  spool_available: boolean;
}

/**
 * What `AuditPort.write` returns for an entry it accepted at once (buffered durability: taken into the bounded buffer):
 * one settled promise shared by every such write, so nothing is allocated per entry and a caller can tell, without
 * waiting, that the write has nothing left to wait for (its trace gets no `gatehouse.audit.write` span).
 */
export const AUDIT_ACCEPTED: Promise<void> = Promise.resolve();

export interface AuditPort {
  /**
   * Resolves when the configured durability is met (strict: committed in PostgreSQL or fsynced to
   * the spool; buffered: accepted in the bounded buffer or the spool). Rejects with
   * GatehouseError('audit_unavailable') when the entry cannot be recorded and the mode forbids
   * going on without it. An entry accepted at once resolves as AUDIT_ACCEPTED.
   */
  write(entry: AuditEntry): Promise<void>;
  /**
   * Throws GatehouseError('audit_unavailable') when a write made now is known to be refused; front
   * doors call it before a write reaches the upstream (spec: a strict-mode write must not run unaudited).
   */
  admit(): void;
  /**
   * Durably records the intent of a write before its upstream sees it (docs/audit.md "Write intents"): the entry as
   * known so far, with the id and ts its finished entry will have. Rejects with GatehouseError('audit_unavailable')
   * when it cannot be recorded and the mode forbids going on without it (strict; buffered fail_closed). The intent is
   * completed by the port itself once the entry with the same id is durable (committed or spooled).
   */
  recordIntent(entry: AuditEntry): Promise<void>;
  /** The /ready `audit_buffer` check. */
  health(): AuditHealth;
  /** Counters for /stats. */
  stats(): AuditStats;
  start(): Promise<void>;
  /** Pushes everything buffered to PostgreSQL (or the spool) and waits for it. */
  flush(): Promise<void>;
  /** Flushes, stops timers and releases files; the database handle stays the caller's. */
  close(): Promise<void>;
}

/** Keeps entries in an array: the baseline sink of the bench and a fake-free stand-in for unit tests. */
export class MemoryAuditSink implements AuditPort {
  readonly entries: AuditEntry[] = [];

  async write(entry: AuditEntry): Promise<void> {
    this.entries.push(entry);
    this.intents.delete(entry.id);
  }

  admit(): void {}

  /** Intents recorded and not completed, by id. */
  readonly intents = new Map<string, AuditEntry>();

  async recordIntent(entry: AuditEntry): Promise<void> {
    this.intents.set(entry.id, structuredClone(entry));
  }

  health(): AuditHealth {
    return { ok: true, detail: `memory sink: ${this.entries.length} entries` };
  }

  stats(): AuditStats {
    return {
      mode: 'memory', buffered: 0, buffer_capacity: 0, spooled_entries: 0, spooled_bytes: 0, spool_max_bytes: 0,
      spool_corrupt_records: 0, written: this.entries.length, replayed: 0, failed: 0, dropped: 0,
      postgres_available: false, spool_available: false,
    };
  }

  async start(): Promise<void> {}
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}
