// Managed privileges of a gateway process (docs/least-privilege.md): reconciles every managed source on its triggers, holds each source's state (the role every identity's sessions run as, or why none may run), answers sessions, and reports readiness.
import { GatehouseError } from '../errors/registry.js';
import { KEY_SESSION_REVOKED_CHANNEL } from '../identity/key-sessions.js';
import { POLICY_CHANGED_CHANNEL } from '../admin/policies/service.js';
import { CATALOG_CHANGED_CHANNEL, type CatalogChangedMessage } from '../catalog/events.js';
import { SOURCES_CHANGED_CHANNEL, type RegisteredSource, type SourceRegistry } from '../registry/sources.js';
import type { Coordination, Unsubscribe } from '../coord/port.js';
import type { Logger } from '../observability/logger.js';
import type { AdminAuditor } from '../admin/audit-events.js';
import type { Readiness } from '../health/readiness.js';
import { managedSettings, reconcileSource, type ReconcileDeps, type ReconcileResult } from './reconciler.js';

/** Asks every gateway process to reconcile (the admin API's "reconcile now", a catalog scan); the message is a source id or `*`. */
export const PRIVILEGES_RECONCILE_CHANNEL = 'privileges:reconcile';

export type SourcePrivilegeState =
  | { readonly status: 'ok'; readonly sessionRoles: ReadonlyMap<number, string>; readonly baseRole: string; readonly at: number; readonly fingerprint: string }
  | { readonly status: 'failed'; readonly reason: string; readonly at: number; readonly fingerprint: string };

export interface ManagedPrivilegesDeps {
  readonly reconcile: ReconcileDeps;
  readonly registry: SourceRegistry;
  readonly coord: Coordination;
  readonly log: Logger;
  readonly adminAudit: AdminAuditor;
  readonly readiness: Readiness;
  /** Periodic reconciliation: drift made by hand, structure changed outside the gateway, grants that expired. */
  readonly intervalMs: number;
  readonly instanceId: string;
}

/** How long a session waits for the first reconciliation of its source before it is refused. */
const FIRST_RECONCILE_WAIT_MS = 15_000;
const DEBOUNCE_MS = 50;
const LOCK_TTL_MS = 120_000;
/** A failed reconciliation is tried again after 1 s, doubling up to this (or the periodic interval, if shorter). */
const RETRY_MAX_MS = 30_000;
const RETRY_FIRST_MS = 1_000;

function fingerprintOf(source: RegisteredSource): string {
  return JSON.stringify(source.connection_config);
}

function refusal(sourceId: string, reason: string): GatehouseError {
  return new GatehouseError('unavailable', `Managed privileges of source "${sourceId}" are not in place (${reason}); sessions are refused until reconciliation succeeds.`, {
    details: { sqlstate: '57P03' },
  });
}

export class ManagedPrivileges {
  readonly #states = new Map<string, SourcePrivilegeState>();
  readonly #running = new Map<string, Promise<ReconcileResult | null>>();
  readonly #again = new Set<string>();
  readonly #pending = new Map<string, string>();
  /** Sources whose last reconciliation failed: the attempts so far and the timer of the next. */
  readonly #retries = new Map<string, { attempts: number; timer: NodeJS.Timeout }>();
  #debounce: NodeJS.Timeout | null = null;
  #timer: NodeJS.Timeout | null = null;
  #unsubscribe: Unsubscribe[] = [];
  #readinessRegistered = false;
  #closed = false;
  /** Sessions by (source, identity) to end when their role changes or the source fails: the wire listener registers them. */
  readonly #sessions = new Set<{ sourceId: string; identityId: number; role: string; end(reason: string): void }>();

  constructor(private readonly deps: ManagedPrivilegesDeps) {}

  async start(): Promise<void> {
    const all = () => this.request('*', 'change');
    for (const channel of [KEY_SESSION_REVOKED_CHANNEL, POLICY_CHANGED_CHANNEL, SOURCES_CHANGED_CHANNEL]) this.#unsubscribe.push(await this.deps.coord.subscribe(channel, all));
    this.#unsubscribe.push(
      await this.deps.coord.subscribe(PRIVILEGES_RECONCILE_CHANNEL, (m) => {
        // `<source id or *>` or `<source id>\u0000<origin instance>`: an announcement of this very process is not news.
        const [target = '*', origin] = m.split('\u0000');
        if (origin !== this.deps.instanceId) this.request(target, 'requested');
      }),
    );
    // The catalog's scans (src/catalog/events.ts): a scan that found changes is a structure change to reconcile.
    this.#unsubscribe.push(
      await this.deps.coord.subscribe(CATALOG_CHANGED_CHANNEL, (raw) => {
        let msg: Partial<CatalogChangedMessage>;
        try {
          msg = JSON.parse(raw) as Partial<CatalogChangedMessage>;
        } catch {
          return;
        }
        if (msg.reason === 'scanned' && typeof msg.source_id === 'string' && (msg.changes ?? 1) > 0) this.request(msg.source_id, 'catalog_scanned');
      }),
    );
    this.#timer = setInterval(() => this.request('*', 'periodic'), this.deps.intervalMs);
    this.#timer.unref();
    this.request('*', 'startup');
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    if (this.#debounce) clearTimeout(this.#debounce);
    for (const r of this.#retries.values()) clearTimeout(r.timer);
    this.#retries.clear();
    for (const u of this.#unsubscribe.splice(0)) await u().catch(() => undefined);
    await Promise.allSettled([...this.#running.values()]);
  }

  /** Schedules a reconciliation of one source (or `*`: every managed source), coalescing bursts of triggers. */
  request(sourceId: string, trigger: string): void {
    if (this.#closed) return;
    this.#pending.set(sourceId, trigger);
    if (this.#debounce) return;
    this.#debounce = setTimeout(() => {
      this.#debounce = null;
      const pending = [...this.#pending];
      this.#pending.clear();
      const ids = new Set<string>();
      const triggers = new Map<string, string>();
      for (const [id, t] of pending) {
        const list = id === '*' ? this.#managedSources().map((s) => s.source_id) : [id];
        for (const x of list) {
          ids.add(x);
          triggers.set(x, t);
        }
      }
      // Sources no longer managed (or gone) drop their state: their sessions run as configured again, or not at all.
      for (const id of this.#states.keys()) if (!this.#managedSources().some((s) => s.source_id === id)) this.#states.delete(id);
      for (const id of ids) void this.reconcile(id, triggers.get(id) ?? 'change');
    }, DEBOUNCE_MS);
    this.#debounce.unref();
  }

  #managedSources(): RegisteredSource[] {
    return this.deps.registry.list().filter((s) => s.enabled && managedSettings(s) !== null);
  }

  /** One reconciliation of the source at a time in this process (a trigger during one runs another after it), one across replicas (coordination lock). */
  reconcile(sourceId: string, trigger: string): Promise<ReconcileResult | null> {
    const running = this.#running.get(sourceId);
    if (running) {
      this.#again.add(sourceId);
      return running;
    }
    const run = this.#reconcileOnce(sourceId, trigger).finally(() => {
      this.#running.delete(sourceId);
      if (this.#again.delete(sourceId)) void this.reconcile(sourceId, trigger);
    });
    this.#running.set(sourceId, run);
    return run;
  }

  async #reconcileOnce(sourceId: string, trigger: string): Promise<ReconcileResult | null> {
    const source = this.deps.registry.get(sourceId);
    if (!source || !source.enabled || managedSettings(source) === null) {
      this.#states.delete(sourceId);
      this.#clearRetry(sourceId);
      return null;
    }
    this.#ensureReadiness();
    const lock = await this.#lock(sourceId);
    let result: ReconcileResult;
    try {
      result = lock === null ? failedResult(sourceId, 'another gateway process holds the reconciliation lock too long') : await reconcileSource(this.deps.reconcile, source, { dryRun: false });
    } finally {
      await lock?.release().catch(() => undefined);
    }
    const before = this.#states.get(sourceId);
    const fingerprint = fingerprintOf(source);
    const now: SourcePrivilegeState =
      result.ok && result.desired
        ? { status: 'ok', sessionRoles: result.desired.sessionRoles, baseRole: result.desired.baseRole, at: Date.now(), fingerprint }
        : { status: 'failed', reason: result.error ?? 'reconciliation failed', at: Date.now(), fingerprint };
    this.#states.set(sourceId, now);
    this.#endStaleSessions(sourceId);
    if (now.status === 'ok') this.#clearRetry(sourceId);
    else this.#scheduleRetry(sourceId);
    // A failure repeated (by the retries) with the same reason is not news: one audit entry when it starts or changes.
    const newFailure = now.status === 'failed' && (before?.status !== 'failed' || before.reason !== now.reason);
    if (result.statement_count > 0 || newFailure || before?.status !== now.status) await this.#audit(result, trigger);
    if (newFailure) this.deps.log.warn({ source_id: sourceId, trigger, problem: result.error }, 'managed privileges could not be reconciled; sessions for the source are refused');
    else if (now.status === 'ok' && result.statement_count > 0) this.deps.log.info({ source_id: sourceId, trigger, ...result.summary, drift: result.drift, duration_ms: result.duration_ms }, 'managed privileges reconciled');
    return result;
  }

  /**
   * A failed source is not left refusing sessions until the next periodic run: it is tried again after 1 s, 2 s, 4 s…
   * up to 30 s (or the periodic interval), until a run succeeds or the source is no longer managed.
   */
  #scheduleRetry(sourceId: string): void {
    const attempts = (this.#retries.get(sourceId)?.attempts ?? 0) + 1;
    this.#clearRetry(sourceId);
    if (this.#closed) return;
    const delay = Math.min(RETRY_FIRST_MS * 2 ** (attempts - 1), RETRY_MAX_MS, this.deps.intervalMs);
    const timer = setTimeout(() => this.request(sourceId, 'retry'), delay);
    timer.unref();
    this.#retries.set(sourceId, { attempts, timer });
  }

  #clearRetry(sourceId: string): void {
    const retry = this.#retries.get(sourceId);
    if (retry === undefined) return;
    clearTimeout(retry.timer);
    this.#retries.delete(sourceId);
  }

  async #lock(sourceId: string) {
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        const lock = await this.deps.coord.acquireLock(`privileges:${sourceId}`, LOCK_TTL_MS);
        if (lock !== null || Date.now() > deadline) return lock;
      } catch {
        return null;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async #audit(result: ReconcileResult, trigger: string): Promise<void> {
    await this.deps.adminAudit
      .record({
        request_id: `privileges:${this.deps.instanceId}:${Date.now()}`,
        admin_user_id: null,
        action: 'privileges.reconcile',
        target: { type: 'data_source', id: result.source_id },
        outcome: result.ok ? 'success' : 'failure',
        status: result.ok ? 200 : 503,
        client_ip: null,
        details: { trigger, summary: result.summary, drift: result.drift, statement_count: result.statement_count, statements: result.statements.slice(0, 50), error: result.error, duration_ms: result.duration_ms },
      })
      .catch((err: unknown) => this.deps.log.warn({ err: { code: (err as { code?: string }).code } }, 'privileges audit entry could not be recorded'));
  }

  #ensureReadiness(): void {
    if (this.#readinessRegistered) return;
    this.#readinessRegistered = true;
    // Registered once a source uses managed privileges, so /ready lists the check only where it means something.
    this.deps.readiness.register('privileges', () => this.health());
  }

  health(): { ok: boolean; detail: string } {
    const failed: string[] = [];
    let pending = 0;
    for (const s of this.#managedSources()) {
      const st = this.#states.get(s.source_id);
      if (st === undefined) pending++;
      else if (st.status === 'failed') failed.push(`${s.source_id}: ${st.reason}`);
    }
    if (failed.length > 0) return { ok: false, detail: `managed privileges not in place for ${failed.join('; ')}` };
    if (pending > 0) return { ok: false, detail: `${pending} source(s) not reconciled yet` };
    return { ok: true, detail: 'managed privileges in place' };
  }

  /** Asks the other gateway processes to reconcile the source (this one just did). */
  async announce(sourceId: string): Promise<void> {
    await this.deps.coord.publish(PRIVILEGES_RECONCILE_CHANNEL, `${sourceId}\u0000${this.deps.instanceId}`).catch(() => undefined);
  }

  /** The plan a reconciliation would apply now, applying nothing (the dry-run API). */
  async dryRun(source: RegisteredSource): Promise<ReconcileResult> {
    return reconcileSource(this.deps.reconcile, source, { dryRun: true });
  }

  state(sourceId: string): SourcePrivilegeState | undefined {
    return this.#states.get(sourceId);
  }

  /**
   * The role a session of this identity on this source must SET ROLE to: null for a source without managed
   * privileges (the configured user and mapped_pg_role apply); a refusal (57P03) while the source's privileges are not
   * in place — never the configured user instead.
   */
  async sessionRole(source: RegisteredSource, identityId: number): Promise<string | null> {
    if (managedSettings(source) === null) return null;
    let st = this.#states.get(source.source_id);
    if (st === undefined || st.fingerprint !== fingerprintOf(source)) {
      const first = this.reconcile(source.source_id, 'session');
      const timeout = new Promise<null>((r) => setTimeout(() => r(null), FIRST_RECONCILE_WAIT_MS).unref());
      await Promise.race([first, timeout]);
      st = this.#states.get(source.source_id);
    }
    if (st === undefined) throw refusal(source.source_id, 'not reconciled yet');
    if (st.status === 'failed') throw refusal(source.source_id, st.reason);
    return st.sessionRoles.get(identityId) ?? st.baseRole;
  }

  /** The role now due for (source, identity), without waiting: null when the source is not in place. */
  currentRole(sourceId: string, identityId: number): string | null {
    const st = this.#states.get(sourceId);
    if (st === undefined || st.status !== 'ok') return null;
    return st.sessionRoles.get(identityId) ?? st.baseRole;
  }

  /**
   * A session running as `role`: ended (by `end`) as soon as a reconciliation gives its identity another role or the
   * source's privileges fail, so a revoked identity keeps no session with privileges it lost. Returns the unregister.
   */
  track(sourceId: string, identityId: number, role: string, end: (reason: string) => void): () => void {
    const entry = { sourceId, identityId, role, end };
    this.#sessions.add(entry);
    return () => this.#sessions.delete(entry);
  }

  #endStaleSessions(sourceId: string): void {
    for (const s of [...this.#sessions]) {
      if (s.sourceId !== sourceId) continue;
      const now = this.currentRole(sourceId, s.identityId);
      if (now === s.role) continue;
      this.#sessions.delete(s);
      s.end(now === null ? 'the source\'s managed privileges are not in place' : 'the identity\'s privileges changed');
    }
  }
}

function failedResult(sourceId: string, error: string): ReconcileResult {
  return { source_id: sourceId, ok: false, dry_run: false, summary: {}, drift: 0, statements: [], statement_count: 0, error, duration_ms: 0 };
}
