// Idempotent batch insert of audit entries into the partitioned table: one statement, one JSON parameter, duplicates by id ignored.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { AUDIT_FIELDS, type AuditEntry } from './entry.js';
import { ensurePartitionsFor } from './partitions.js';

const COLUMNS = sql.raw(AUDIT_FIELDS.join(', '));

/** SQLSTATE 23514 with this text: the row's month has no partition yet. */
function isMissingPartition(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown };
  return e?.code === '23514' && typeof e.message === 'string' && e.message.includes('no partition');
}

/**
 * Inserts a batch in one statement. `json_populate_recordset` turns one JSON parameter into typed
 * rows, which keeps any batch size under PostgreSQL's 65,535-parameter limit and parses fast.
 * `ON CONFLICT (id, ts) DO NOTHING` makes retries and spool replays idempotent (the primary key
 * includes ts because a partitioned table's unique keys must include the partition key; an entry
 * keeps its ts for life). A month without a partition (maintenance late) is created and retried once.
 * Returns the number of rows newly stored.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function insertAuditEntries(db: Kysely<any>, entries: readonly AuditEntry[]): Promise<number> {
  if (entries.length === 0) return 0;
  const run = async (): Promise<number> => {
    const result = await sql`insert into audit_entries (${COLUMNS})
      select ${COLUMNS} from json_populate_recordset(null::audit_entries, ${JSON.stringify(entries)}::json)
      on conflict (id, ts) do nothing`.execute(db);
    return Number(result.numAffectedRows ?? 0);
  };
  try {
    return await run();
  } catch (error) {
    if (!isMissingPartition(error)) throw error;
    await ensurePartitionsFor(db, entries.map((e) => new Date(e.ts)));
    return run();
  }
}
