// V8 settings for every Gatehouse process, applied before the rest of the service is loaded (main.ts imports this first).
import { setFlagsFromString } from 'node:v8';

// Allocation-site pretenuring lets V8 allocate some per-request objects straight into old space, where they keep
// the young objects they point to alive through every scavenge until a full GC: on the proxy's miss path it made
// scavenges promote ≈ 6 MB and pause 10–20 ms. Without it, pauses and the miss p99 drop
// (docs/decisions/0001-proxy-performance.md). The flag is read at GC time, so setting it at start-up applies.
setFlagsFromString('--no-allocation-site-pretenuring');

/**
 * A worker's heap: PDF.js leaves a few MB of short-lived objects per page, and V8's default growing factor (up to
 * 4× the live size after each full GC) let the old space of a worker whose live set is ≈ 35 MB reach 250 MB before
 * it was collected — the bulk of the 470–497 MB RSS measured by bench:ingest. A growing factor of 1.2 keeps the
 * worker near its live set at no measurable CPU cost (docs/decisions/0022-worker-memory-and-sync.md). The flag is
 * read at GC time like the one above; only worker processes set it (the gateway's throughput is tuned in 0001).
 */
export function applyWorkerHeapFlags(): void {
  setFlagsFromString('--heap-growing-percent=20');
}
