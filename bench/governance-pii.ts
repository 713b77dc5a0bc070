// Personal-data scan benchmark: a ~100 KB nested API-like JSON document, scanned fast and deep, as a ratio to JSON.parse + JSON.stringify of the same document (goal ≤ 3×, docs/governance/pii.md).
import { createPiiScanner } from '../src/governance/pii/index.js';
import { quantile } from './stats.js';

const TARGET_RATIO = 3;
const TARGET_BYTES = 100 * 1024;

/** Deterministic pseudo-random numbers so every run scans the same document. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const FIRST = ['Ada', 'Grace', 'Linus', 'Margaret', 'Ken', 'Barbara', 'Dennis', 'Frances', 'Edsger', 'Radia'];
const LAST = ['Lovelace', 'Hopper', 'Torvalds', 'Hamilton', 'Thompson', 'Liskov', 'Ritchie', 'Allen', 'Dijkstra', 'Perlman'];
const STATUS = ['pending', 'paid', 'shipped', 'delivered', 'refunded'];
const PRODUCTS = ['USB-C cable 2m', 'Mechanical keyboard (ISO DE)', 'Monitor arm, black', 'Noise-cancelling headphones', 'Laptop stand'];

/** Orders with customers, addresses, line items, payment and event history: about one record in five carries PII in free text. */
export function buildDocument(targetBytes = TARGET_BYTES): unknown {
  const r = rng(42);
  const pick = <T>(a: readonly T[]): T => a[Math.floor(r() * a.length)]!;
  const orders: unknown[] = [];
  const doc = { data: orders, meta: { page: 1, per_page: 0, total: 0, generated_at: '2024-05-01T12:00:00Z', api_version: 'v2.14.0' } };
  let i = 0;
  while (JSON.stringify(doc).length < targetBytes) {
    const first = pick(FIRST);
    const last = pick(LAST);
    const pii = i % 5 === 0;
    orders.push({
      id: `ord_${(100000 + i).toString(36)}`,
      number: 20240000 + i,
      status: pick(STATUS),
      created_at: new Date(Date.UTC(2024, 0, 1) + i * 3_600_000).toISOString(),
      customer: {
        id: `cus_${(900000 + i * 7).toString(36)}`,
        first_name: first,
        last_name: last,
        email: `${first.toLowerCase()}.${last.toLowerCase()}@example.com`,
        phone: pii ? '+44 20 7946 0958' : null,
        address: { street: `${1 + (i % 200)} Main Street`, city: 'Springfield', postcode: String(10000 + i), country: 'US' },
        marketing_opt_in: r() > 0.5,
        tags: ['vip', 'newsletter'].slice(0, i % 3),
      },
      items: Array.from({ length: 1 + (i % 4) }, (_, k) => ({
        sku: `SKU-${1000 + k}-${i % 97}`,
        name: pick(PRODUCTS),
        quantity: 1 + (k % 3),
        unit_price: Math.round(r() * 20000) / 100,
        currency: 'EUR',
      })),
      payment: { method: 'card', brand: 'visa', last4: '1111', card_number: pii ? '4111 1111 1111 1111' : null, authorized: true },
      notes: pii ? `Customer called from ${first.toLowerCase()}@example.org, asked to ship to another address.` : 'Leave at the front door.',
      events: [
        { at: '2024-05-01T12:00:00Z', type: 'created', by: 'api', ip: pii ? '203.0.113.195' : null },
        { at: '2024-05-01T12:05:00Z', type: 'payment_authorized', by: 'psp', reference: `pi_${(i * 7919).toString(36)}` },
      ],
    });
    i++;
  }
  doc.meta.per_page = orders.length;
  doc.meta.total = orders.length;
  return doc;
}

const median = (xs: number[]): number => quantile([...xs].sort((a, b) => a - b), 0.5);

/**
 * Runs the cases round-robin, one batch each per round, so a noisy neighbour on a
 * shared machine slows baseline and scans alike; ratios are taken within a round.
 */
function interleaved(cases: Record<string, () => void>, iters: number, rounds: number): Record<string, { ms: number; ratio: number }> {
  const names = Object.keys(cases);
  for (const n of names) for (let i = 0; i < iters; i++) cases[n]!();
  const times: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < rounds; r++) {
    for (const n of names) {
      const fn = cases[n]!;
      const t0 = performance.now();
      for (let i = 0; i < iters; i++) fn();
      times[n]!.push((performance.now() - t0) / iters);
    }
  }
  const base = times[names[0]!]!;
  return Object.fromEntries(names.map((n) => [n, { ms: median(times[n]!), ratio: median(times[n]!.map((t, r) => t / base[r]!)) }]));
}

export async function bench(): Promise<void> {
  const doc = buildDocument();
  const text = JSON.stringify(doc);
  const bytes = Buffer.byteLength(text);
  const scanner = createPiiScanner({ freeTextFields: ['notes', '**.description'] });
  const iters = 50;
  const rounds = 15;
  let sink = 0;

  const r = interleaved(
    {
      baseline: () => {
        sink += JSON.stringify(JSON.parse(text)).length;
      },
      off: () => {
        sink += scanner.scanJson(doc, { mode: 'off', redactColumns: ['*password*'] }).redactions;
      },
      fast: () => {
        sink += scanner.scanJson(doc, { mode: 'fast' }).redactions;
      },
      deep: () => {
        sink += scanner.scanJson(doc, { mode: 'deep' }).redactions;
      },
    },
    iters,
    rounds,
  );

  const mbps = (ms: number): string => ((bytes / 1e6 / ms) * 1000).toFixed(1).padStart(7);
  const row = (name: string, key: string): string => {
    const { ms, ratio } = r[key]!;
    const verdict = key === 'baseline' ? '' : `  ratio ${ratio.toFixed(2)}x  ${ratio <= TARGET_RATIO ? 'PASS' : 'FAIL'} (<= ${TARGET_RATIO}x)`;
    return `  ${name.padEnd(36)} ${ms.toFixed(3).padStart(7)} ms  ${mbps(ms)} MB/s${verdict}`;
  };
  const fastResult = scanner.scanJson(doc, { mode: 'fast' });
  const deepResult = scanner.scanJson(doc, { mode: 'deep' });
  console.log(`\npersonal-data scan — ${(bytes / 1024).toFixed(1)} KiB JSON document, ${rounds} interleaved rounds x ${iters}, medians (ratio = median of per-round ratios)`);
  console.log(row('baseline JSON.parse + JSON.stringify', 'baseline'));
  console.log(row('scanJson mode=off (copy + columns)', 'off'));
  console.log(row('scanJson mode=fast', 'fast'));
  console.log(row('scanJson mode=deep', 'deep'));
  console.log(`  redactions per document: fast ${fastResult.redactions} ${JSON.stringify(fastResult.byType)}; deep ${deepResult.redactions} ${JSON.stringify(deepResult.byType)}`);
  if (sink < 0) console.log(sink);
}
