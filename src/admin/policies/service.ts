// The policy service: holds the compiled policy set of this instance, reloads it when the stored version changes or any instance announces one, and announces after writes.
import { compilePolicies, PolicyCompileError } from '../../governance/policy/index.js';
import type { CompiledPolicySet } from '../../governance/policy/index.js';
import type { Coordination } from '../../coord/index.js';
import { GatehouseError } from '../../errors/registry.js';
import type { Logger } from '../../observability/logger.js';
import { getPolicySetVersion, listPolicies } from '../../store/repos/policies.js';
import type { Db } from '../../store/repos/util.js';

/** Channel on which a policy write announces the new version; every instance reloads (docs/policy-api.md). */
export const POLICY_CHANGED_CHANNEL = 'policy:changed';

export interface PolicyServiceOptions {
  /** Safety reload period: bounds staleness when an announcement was lost in a pub/sub outage. */
  reloadIntervalMs?: number;
  /** Identifies this instance in announcements (for logs). */
  instanceId?: string;
}

export interface PolicyChangedMessage {
  version: number;
  origin: string;
}

export interface PolicyServiceHealth {
  ok: boolean;
  detail: string;
}

export class PolicyService {
  #set: CompiledPolicySet | null = null;
  #loadedAt: number | null = null;
  /** Why the newest stored version could not be compiled or read; the previous set keeps serving. */
  #lastError: string | null = null;
  #unsubscribe: (() => Promise<void>) | null = null;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #again = false;
  #stopped = false;
  readonly #reloadIntervalMs: number;
  readonly #instanceId: string;

  constructor(
    private readonly db: Db,
    private readonly coord: Coordination,
    private readonly log: Logger,
    opts: PolicyServiceOptions = {},
  ) {
    this.#reloadIntervalMs = opts.reloadIntervalMs ?? 30_000;
    this.#instanceId = opts.instanceId ?? 'local';
  }

  /** Subscribes, then loads; a failed first load is logged and retried by the periodic reload (start-up never fails on it). */
  async start(): Promise<void> {
    this.#unsubscribe = await this.coord.subscribe(POLICY_CHANGED_CHANNEL, (raw) => this.#onMessage(raw));
    this.#timer = setInterval(() => void this.reload(), this.#reloadIntervalMs);
    this.#timer.unref();
    await this.reload();
  }

  /** The compiled set in force; throws `unavailable` (503) before the first successful load — never an empty allow-all set. */
  current(): CompiledPolicySet {
    if (this.#set === null) throw new GatehouseError('unavailable', 'Policies are not loaded yet.');
    return this.#set;
  }

  /** The compiled set, or null before the first successful load. */
  tryCurrent(): CompiledPolicySet | null {
    return this.#set;
  }

  /** Version of the set in force (the `policy_set_version` counter), or null before the first load. */
  version(): number | null {
    return this.#set === null ? null : Number(this.#set.version);
  }

  /**
   * Reads the stored version and recompiles when it differs from the one in force. Reloads run one at a
   * time; a request that arrives while one runs makes exactly one more run afterwards, so no change is missed.
   */
  reload(): Promise<void> {
    if (this.#running !== null) {
      this.#again = true;
      return this.#running;
    }
    this.#running = (async () => {
      try {
        do {
          this.#again = false;
          await this.#reloadOnce();
        } while (this.#again && !this.#stopped);
      } finally {
        this.#running = null;
      }
    })();
    return this.#running;
  }

  async #reloadOnce(): Promise<void> {
    try {
      const stored = await getPolicySetVersion(this.db);
      if (this.#set !== null && Number(this.#set.version) === Number(stored) && this.#lastError === null) return;
      // Rows and counter from one snapshot, so the set is labelled with the version that produced it.
      const { version, rows } = await this.db
        .transaction()
        .setIsolationLevel('repeatable read')
        .execute(async (trx) => ({ version: await getPolicySetVersion(trx), rows: await listPolicies(trx) }));
      if (this.#set !== null && Number(this.#set.version) === Number(version)) {
        this.#lastError = null;
        return;
      }
      const set = compilePolicies(rows, { version: Number(version) });
      const previous = this.#set === null ? null : Number(this.#set.version);
      this.#set = set;
      this.#loadedAt = Date.now();
      this.#lastError = null;
      this.log.info({ version: Number(version), previous, policies: set.policies.length, disabled: set.disabledCount }, 'policy set loaded');
    } catch (err) {
      if (err instanceof PolicyCompileError) {
        this.#lastError = `version refused: ${err.message}`;
        this.log.error({ policy_id: err.policyId, issues: err.issues, serving: this.version() }, 'stored policies do not compile; keeping the previous policy set');
      } else {
        this.#lastError = `reload failed (${(err as { code?: string }).code ?? (err as Error).name ?? 'error'})`;
        this.log.warn({ err, serving: this.version() }, 'policy reload failed; keeping the previous policy set');
      }
    }
  }

  /**
   * After a committed write: brings this instance's set up to date, then tells the others. A failed
   * announcement is logged, not thrown — the write is durable and the periodic reload catches up.
   */
  async announce(version: number): Promise<void> {
    await this.reload();
    const msg: PolicyChangedMessage = { version, origin: this.#instanceId };
    try {
      await this.coord.publish(POLICY_CHANGED_CHANNEL, JSON.stringify(msg));
    } catch (err) {
      this.log.warn({ err, version }, 'could not announce the policy change; other instances pick it up at their next periodic reload');
    }
  }

  #onMessage(raw: string): void {
    let msg: Partial<PolicyChangedMessage>;
    try {
      msg = JSON.parse(raw) as Partial<PolicyChangedMessage>;
    } catch {
      this.log.warn({ channel: POLICY_CHANGED_CHANNEL }, 'ignored a malformed policy change message');
      return;
    }
    // The version only labels the message; reload() always reads the store, which is the authority.
    if (typeof msg.version === 'number' && this.#set !== null && Number(this.#set.version) === msg.version && this.#lastError === null) return;
    void this.reload();
  }

  health(): PolicyServiceHealth {
    if (this.#set === null) return { ok: false, detail: this.#lastError ? `not loaded (${this.#lastError})` : 'not loaded yet' };
    const base = `version ${String(this.#set.version)}, ${this.#set.policies.length} enabled policies`;
    if (this.#lastError !== null) return { ok: true, detail: `${base}; newest version not in force: ${this.#lastError}` };
    return { ok: true, detail: base };
  }

  /** When the set in force was compiled (ms since epoch), or null. */
  loadedAt(): number | null {
    return this.#loadedAt;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#unsubscribe?.();
    this.#unsubscribe = null;
    await this.#running;
  }
}
