// Readiness: the named dependency checks of spec §7 run together, each bounded in time; /ready on every listener renders this one result.
import { withDeadline } from '../util/deadline.js';

export interface CheckResult {
  ok: boolean;
  detail: string;
}

export type CheckFn = () => Promise<CheckResult> | CheckResult;

/**
 * The check names DESIGN §8 fixes for the /ready body; `oidc` only when auth.oidc is enabled (spec §5.6), `privileges`
 * only once a source uses managed privileges (src/privileges/runtime.ts).
 */
export const READINESS_CHECKS = ['database', 'migrations', 'redis', 'registry', 'audit_buffer', 'cache_invalidation', 'oidc', 'privileges'] as const;
export type ReadinessCheckName = (typeof READINESS_CHECKS)[number];

export interface ReadinessReport {
  status: 'ok' | 'fail';
  checks: Record<string, CheckResult>;
}

export class Readiness {
  readonly #checks = new Map<string, CheckFn>();
  readonly #timeoutMs: number;
  #draining = false;

  constructor(opts: { timeoutMs?: number } = {}) {
    this.#timeoutMs = opts.timeoutMs ?? 2_000;
  }

  register(name: ReadinessCheckName, check: CheckFn): void {
    this.#checks.set(name, check);
  }

  /** After SIGTERM the instance reports not ready, so load balancers stop sending before it closes. */
  startDraining(): void {
    this.#draining = true;
  }

  get draining(): boolean {
    return this.#draining;
  }

  async report(): Promise<ReadinessReport> {
    const names = [...this.#checks.keys()];
    const results = await Promise.all(names.map((name) => this.#run(this.#checks.get(name)!)));
    const checks: Record<string, CheckResult> = {};
    names.forEach((name, i) => {
      checks[name] = results[i]!;
    });
    if (this.#draining) checks.shutdown = { ok: false, detail: 'draining: the instance is shutting down' };
    const status = Object.values(checks).every((c) => c.ok) ? 'ok' : 'fail';
    return { status, checks };
  }

  async #run(check: CheckFn): Promise<CheckResult> {
    try {
      return await withDeadline(Promise.resolve().then(check), this.#timeoutMs, () => ({ ok: false, detail: `no answer within ${this.#timeoutMs} ms` }));
    } catch (err) {
      // Check functions translate their own errors; anything else is reported by class only, never by raw message.
      return { ok: false, detail: err instanceof Error && 'code' in err ? `unavailable (${String((err as { code: unknown }).code)})` : 'check failed' };
    }
  }
}
