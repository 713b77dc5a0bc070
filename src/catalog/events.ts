// The catalog's announcements: an in-process hook (`CatalogEvents`) and the coordination channel `catalog:changed`, so other parts (the gateway's catalog view, least-privilege reconciliation) act after a scan (docs/catalog.md "Events").
import { EventEmitter } from 'node:events';
import type { Coordination } from '../coord/index.js';

/** Coordination channel: one JSON message per catalog change of any kind, from any process. */
export const CATALOG_CHANGED_CHANNEL = 'catalog:changed';
/** Coordination channel: wakes the workers' catalog scheduler (an on-demand scan was requested). */
export const CATALOG_SCAN_REQUESTED_CHANNEL = 'catalog:scan-requested';

export type CatalogChangeReason = 'scanned' | 'annotated' | 'acknowledged' | 'settings';

export interface CatalogChangedMessage {
  readonly source_id: string;
  readonly reason: CatalogChangeReason;
  /** For `scanned`: the snapshot written, its version, status and how many changes it found. */
  readonly snapshot_id?: number;
  readonly version?: number;
  readonly status?: 'ok' | 'failed';
  readonly changes?: number;
}

export interface ScanActivity {
  readonly source_id: string;
  readonly worker_id: string;
  readonly at: number;
}

interface EventMap {
  /** After a scan's snapshot is stored (in the process that scanned). */
  scanned: [CatalogChangedMessage];
  /** Any catalog change announced on the channel, from any process (scans, annotations, acknowledgements). */
  changed: [CatalogChangedMessage];
  /** A scan began / ended in this process (holding the source's scan lock). */
  'scan:start': [ScanActivity];
  'scan:end': [ScanActivity];
}

/**
 * The in-process hook. `scanned` fires in the worker that scanned; `changed` fires in every process that called
 * `listen()`, for changes made anywhere (through `catalog:changed`). Listeners must not throw.
 */
export class CatalogEvents extends EventEmitter<EventMap> {
  #unsubscribe: (() => Promise<void>) | null = null;

  constructor(private readonly coord: Coordination) {
    super();
    this.setMaxListeners(50);
  }

  /** Subscribes this process to `catalog:changed`; idempotent. */
  async listen(): Promise<void> {
    if (this.#unsubscribe !== null) return;
    this.#unsubscribe = await this.coord.subscribe(CATALOG_CHANGED_CHANNEL, (raw) => {
      let msg: CatalogChangedMessage;
      try {
        msg = JSON.parse(raw) as CatalogChangedMessage;
      } catch {
        return;
      }
      if (typeof msg?.source_id === 'string') this.emit('changed', msg);
    });
  }

  /** Publishes a change to every process; a lost publish is recovered by the periodic refresh of the readers. */
  async announce(msg: CatalogChangedMessage): Promise<void> {
    if (msg.reason === 'scanned') this.emit('scanned', msg);
    await this.coord.publish(CATALOG_CHANGED_CHANNEL, JSON.stringify(msg)).catch(() => undefined);
  }

  async close(): Promise<void> {
    const u = this.#unsubscribe;
    this.#unsubscribe = null;
    await u?.();
    this.removeAllListeners();
  }
}
