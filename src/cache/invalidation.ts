// The cache invalidation bus: one pub/sub subscription per instance that fans invalidation messages out to local caches (spec §6.5).
import type { Coordination } from '../coord/index.js';
import type { Logger } from '../observability/logger.js';

export interface InvalidationMessage {
  source_id: string;
  generation: number;
  /** The instance that published, so it can skip its own echo when it already acted. */
  origin: string;
}

export type InvalidationListener = (msg: InvalidationMessage) => void;

export class InvalidationBus {
  readonly #listeners = new Set<InvalidationListener>();
  #unsubscribe: (() => Promise<void>) | null = null;
  #subscribed = false;

  constructor(
    private readonly coord: Coordination,
    private readonly channel: string,
    private readonly instanceId: string,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    this.#unsubscribe = await this.coord.subscribe(this.channel, (raw) => this.#deliver(raw));
    this.#subscribed = true;
  }

  onInvalidate(listener: InvalidationListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async publish(sourceId: string, generation: number): Promise<void> {
    const msg: InvalidationMessage = { source_id: sourceId, generation, origin: this.instanceId };
    await this.coord.publish(this.channel, JSON.stringify(msg));
  }

  health(): { ok: boolean; detail: string } {
    if (!this.#subscribed) return { ok: false, detail: 'not subscribed' };
    const status = this.coord.status();
    if (!status.subscriptionsHealthy) return { ok: false, detail: `subscription to ${this.channel} is down; local caches may be stale` };
    return { ok: true, detail: `subscribed to ${this.channel}` };
  }

  async stop(): Promise<void> {
    this.#subscribed = false;
    await this.#unsubscribe?.();
  }

  #deliver(raw: string): void {
    let msg: InvalidationMessage;
    try {
      const parsed = JSON.parse(raw) as Partial<InvalidationMessage>;
      if (typeof parsed.source_id !== 'string' || typeof parsed.generation !== 'number' || typeof parsed.origin !== 'string') return;
      msg = parsed as InvalidationMessage;
    } catch {
      this.log.warn({ channel: this.channel }, 'ignored a malformed cache invalidation message');
      return;
    }
    for (const listener of this.#listeners) {
      try {
        listener(msg);
      } catch (err) {
        this.log.error({ err }, 'cache invalidation listener failed');
      }
    }
  }
}
