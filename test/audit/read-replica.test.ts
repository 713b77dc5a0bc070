// database.read_url: audit search and export read the replica, everything else the primary (a second database stands in for the replica, so where each read went is visible).
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startWorld, type World } from '../support/world.js';
import { withMigratedStore, type MigratedStore } from '../support/pg.js';
import { insertAuditEntries } from '../../src/audit/insert.js';
import { isoTimestamp, newAuditId, type AuditEntry } from '../../src/audit/entry.js';

let replica: MigratedStore;
let world: World;
const replicaEntryId = newAuditId();

beforeAll(async () => {
  replica = await withMigratedStore();
  const entry: AuditEntry = {
    id: replicaEntryId, ts: isoTimestamp(Date.now()), request_id: 'replica-only-request', channel: 'http',
    identity_id: null, admin_user_id: null, source_id: 'replica_src', operation: 'read', method: 'GET', path: '/only/on/the/replica',
    sql_fingerprint: null, sql_normalized: null, tables: [], decision: 'allow', reasons: [], policy_ids: [], approval_id: null,
    status: 200, upstream_status: 200, cache: 'miss', redactions: 0, bytes_in: 0, bytes_out: 10, duration_ms: 1, client_ip: null,
    action: null, target: null, changes: null, error_code: null,
  };
  await insertAuditEntries(replica.store.db, [entry]);
  world = await startWorld({ env: { SERVICE_DATABASE__READ_URL: replica.database.url } });
}, 60_000);

afterAll(async () => {
  await world?.stop();
  await replica?.cleanup();
});

test('GET /api/audit and its export read database.read_url; writes and the rest of the admin API use the primary', async () => {
  const page = await world.admin('GET', '/api/audit?limit=50');
  expect(page.status).toBe(200);
  expect((page.json.items as Array<{ id: string }>).map((e) => e.id)).toEqual([replicaEntryId]);
  const exported = await world.admin('GET', '/api/audit/export?format=jsonl');
  expect(exported.status).toBe(200);
  expect(exported.text).toContain('/only/on/the/replica');

  // The owner's sign-in and this token's creation were recorded in the primary, where writes go.
  await world.svc.running.services.audit.flush();
  const primary = await world.svc.database!.connect();
  try {
    const rows = (await primary.query("select count(*)::int as n, count(*) filter (where request_id = 'replica-only-request')::int as replica_rows from audit_entries")).rows[0] as { n: number; replica_rows: number };
    expect(rows.n).toBeGreaterThan(0);
    expect(rows.replica_rows).toBe(0);
  } finally {
    await primary.end();
  }
  expect((await world.admin('GET', '/api/identities')).status).toBe(200);
});
