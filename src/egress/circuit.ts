// Per-source circuit breakers (cockatiel): consecutive upstream failures open a source's circuit, which answers 503 until a half-open probe succeeds (spec §4 processing step 6; docs/egress.md).
import { BrokenCircuitError, CircuitState, ConsecutiveBreaker, IsolatedCircuitError, circuitBreaker, handleWhen } from 'cockatiel';
import type { CircuitBreakerPolicy } from 'cockatiel';
import { CircuitOpenError, UpstreamError } from './errors.js';

export interface CircuitRegistryOptions {
  /** Consecutive failures that open a source's circuit. */
  failureThreshold: number;
  /** How long an open circuit refuses calls before letting one probe through (half-open). */
  halfOpenAfterMs: number;
}

export type CircuitStateName = 'closed' | 'open' | 'half_open' | 'isolated';

export interface SourceCircuit {
  /**
   * Runs one upstream call under the source's breaker. Failures: thrown UpstreamError (connect errors,
   * timeouts, resets) and results with a numeric `status` ≥ 500. A 5xx result still comes back to the
   * caller (it is the upstream's answer); it only counts against the circuit. Other errors (egress
   * denial, size limit) pass through without counting. Open → CircuitOpenError (503).
   */
  execute<T>(fn: () => Promise<T>): Promise<T>;
  /** `half_open` as soon as the delay has passed (the next call is the probe). */
  readonly state: CircuitStateName;
}

const STATE_NAMES: Record<CircuitState, CircuitStateName> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.Open]: 'open',
  [CircuitState.HalfOpen]: 'half_open',
  [CircuitState.Isolated]: 'isolated',
};

/** Errors the breaker counts: the upstream's fault, not the gateway's decision. */
export function isCircuitFailure(err: unknown): boolean {
  return err instanceof UpstreamError && err.countsAsCircuitFailure;
}

function isFailureResult(result: unknown): boolean {
  if (typeof result !== 'object' || result === null) return false;
  const status = (result as { status?: unknown }).status;
  return typeof status === 'number' && status >= 500;
}

export class CircuitRegistry {
  readonly #options: CircuitRegistryOptions;
  readonly #circuits = new Map<string, SourceCircuit>();

  constructor(options: CircuitRegistryOptions) {
    if (!Number.isInteger(options.failureThreshold) || options.failureThreshold < 1) throw new TypeError('failureThreshold must be a positive integer');
    if (!Number.isInteger(options.halfOpenAfterMs) || options.halfOpenAfterMs < 1) throw new TypeError('halfOpenAfterMs must be a positive integer');
    this.#options = { ...options };
  }

  /** The circuit of one source, created closed on first use. */
  for(sourceId: string): SourceCircuit {
    let circuit = this.#circuits.get(sourceId);
    if (circuit === undefined) {
      circuit = this.#create(sourceId);
      this.#circuits.set(sourceId, circuit);
    }
    return circuit;
  }

  /** State without creating a circuit (closed when the source has none yet). */
  state(sourceId: string): CircuitStateName {
    return this.#circuits.get(sourceId)?.state ?? 'closed';
  }

  /** Snapshot for /stats and health views. */
  states(): Record<string, CircuitStateName> {
    return Object.fromEntries([...this.#circuits].map(([id, c]) => [id, c.state]));
  }

  /** Forgets a source's circuit (source deleted or reconfigured). */
  delete(sourceId: string): void {
    this.#circuits.delete(sourceId);
  }

  #create(sourceId: string): SourceCircuit {
    const policy: CircuitBreakerPolicy = circuitBreaker(handleWhen(isCircuitFailure).orWhenResult(isFailureResult), {
      halfOpenAfter: this.#options.halfOpenAfterMs,
      breaker: new ConsecutiveBreaker(this.#options.failureThreshold),
    });
    const halfOpenAfterMs = this.#options.halfOpenAfterMs;
    const retryAfterSeconds = Math.max(1, Math.ceil(halfOpenAfterMs / 1000));
    // cockatiel moves Open → HalfOpen lazily on the next call; track when it opened so `state` tells the truth.
    let openedAt = 0;
    policy.onBreak(() => {
      openedAt = Date.now();
    });
    return {
      async execute<T>(fn: () => Promise<T>): Promise<T> {
        try {
          return await policy.execute(() => fn());
        } catch (err) {
          if (err instanceof BrokenCircuitError || err instanceof IsolatedCircuitError) throw new CircuitOpenError(sourceId, retryAfterSeconds, err);
          throw err;
        }
      },
      get state() {
        if (policy.state === CircuitState.Open && Date.now() - openedAt >= halfOpenAfterMs) return 'half_open';
        return STATE_NAMES[policy.state];
      },
    };
  }
}
