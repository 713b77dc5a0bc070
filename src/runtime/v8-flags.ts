// V8 settings for every Gatehouse process, applied before the rest of the service is loaded (main.ts imports this first).
import { setFlagsFromString } from 'node:v8';

// Allocation-site pretenuring lets V8 allocate some per-request objects straight into old space, where they keep
// the young objects they point to alive through every scavenge until a full GC: on the proxy's miss path it made
// scavenges promote ≈ 6 MB and pause 10–20 ms. Without it, pauses and the miss p99 drop
// (docs/decisions/0001-proxy-performance.md). The flag is read at GC time, so setting it at start-up applies.
setFlagsFromString('--no-allocation-site-pretenuring');
