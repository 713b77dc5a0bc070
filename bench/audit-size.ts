// Control-store growth per audit entry, for sizing (docs/operations.md): inserts typical proxy and wire entries into a migrated database and reads the table and index sizes of the audit partitions.
import { sql } from 'kysely';
import { withMigratedStore } from '../test/support/pg.js';
import { insertAuditEntries } from '../src/audit/insert.js';
import { isoTimestamp, newAuditId, type AuditEntry } from '../src/audit/entry.js';

const ENTRIES = Number(process.env.BENCH_AUDIT_ENTRIES ?? 100_000);
const BATCH = 1_000;

function entry(i: number): AuditEntry {
  const now = Date.now() - (ENTRIES - i) * 10;
  const wire = i % 3 === 0;
  return {
    id: newAuditId(now), ts: isoTimestamp(now), request_id: newAuditId(now), channel: wire ? 'pgwire' : 'http',
    identity_id: 1 + (i % 50), admin_user_id: null, source_id: wire ? 'orders_db' : 'crm_api', operation: 'read', method: wire ? null : 'GET',
    path: wire ? null : `/v1/customers/${i % 5000}`, sql_fingerprint: wire ? 'a1b2c3d4e5f60718' : null,
    sql_normalized: wire ? 'select id, name, email from customers where id = $1' : null, tables: wire ? ['public.customers'] : [],
    decision: 'allow', reasons: ['role reader allows GET /v1/**'], policy_ids: [3], approval_id: null, status: 200, upstream_status: 200,
    cache: i % 2 === 0 ? 'hit' : 'miss', redactions: i % 4, bytes_in: 0, bytes_out: 850, duration_ms: 3.25, client_ip: '10.1.2.3',
    action: null, target: null, changes: null, error_code: null,
  };
}

const m = await withMigratedStore();
try {
  for (let i = 0; i < ENTRIES; i += BATCH) await insertAuditEntries(m.store.db, Array.from({ length: Math.min(BATCH, ENTRIES - i) }, (_, k) => entry(i + k)));
  await sql`vacuum analyze audit_entries`.execute(m.store.db);
  const r = await sql<{ heap: string; indexes: string; total: string }>`
    select sum(pg_table_size(relid))::text as heap, sum(pg_indexes_size(relid))::text as indexes, sum(pg_total_relation_size(relid))::text as total
    from pg_partition_tree('audit_entries') where isleaf`.execute(m.store.db);
  const { heap, indexes, total } = r.rows[0]!;
  const perMillion = (b: string) => ((Number(b) / ENTRIES) * 1_000_000) / 1024 ** 3;
  console.log(`audit growth: ${ENTRIES} entries (⅔ proxy, ⅓ wire): table ${perMillion(heap).toFixed(2)} GiB, indexes ${perMillion(indexes).toFixed(2)} GiB, total ${perMillion(total).toFixed(2)} GiB per million entries (${(Number(total) / ENTRIES).toFixed(0)} bytes each)`);
} finally {
  await m.cleanup();
}
