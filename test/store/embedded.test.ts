// The embedded PGlite control store: migrations, persistence across reopen, one process per directory, serialized
// transactions, and document search on its keys (decision record 0026).
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { openControlStore } from '../../src/store/db.js';
import type { ControlStore } from '../../src/store/db.js';
import { StoreUnavailableError } from '../../src/store/errors.js';
import { migrateTo, migrateToLatest, migrationStatus } from '../../src/store/migrate.js';
import { migrations } from '../../src/store/migrations/index.js';
import * as identities from '../../src/store/repos/identities.js';
import * as policies from '../../src/store/repos/policies.js';
import { saveDocument } from '../../src/store/repos/documents.js';
import { searchPages } from '../../src/store/repos/document-search.js';
import { createTempDir } from '../support/pg.js';
import { FOUNDATION_TABLES } from './control-tables.js';

const all = Object.keys(migrations);

function embedded(dir: string) {
  return openControlStore({ url: null, embeddedDir: dir, poolMax: 1, connectTimeoutMs: 5_000 });
}

async function tables(store: ControlStore): Promise<string[]> {
  const { rows } = await sql<{ table_name: string }>`
    select table_name from information_schema.tables
    where table_schema = 'public' and table_name not like 'kysely_%' order by table_name`.execute(store.db);
  return rows.map((r) => r.table_name);
}

describe('embedded PGlite control store', () => {
  let tmp: { dir: string; remove(): Promise<void> };
  let dataDir: string;
  let store: ControlStore | undefined;

  beforeAll(async () => {
    tmp = await createTempDir('gh-pglite-');
    dataDir = path.join(tmp.dir, 'nested', 'pgdata');
  });
  afterAll(async () => {
    await store?.close();
    await tmp?.remove();
  });

  it('creates its directory, migrates to head, and reports status like PostgreSQL', async () => {
    store = await embedded(dataDir);
    expect(store.kind).toBe('pglite');
    await store.ping();
    expect((await migrationStatus(store.db)).pending).toEqual(all);
    expect((await migrateToLatest(store.db)).applied).toEqual(all);
    expect(await tables(store)).toEqual(expect.arrayContaining(FOUNDATION_TABLES));
    expect(await migrationStatus(store.db)).toEqual({ atHead: true, applied: all, pending: [], unknown: [] });
    expect(await readFile(`${dataDir}.lock`, 'utf8')).toBe(String(process.pid));
    // PGlite's first start runs initdb in WebAssembly: ≈ 30 s alone on the shared 2-core machine under load.
  }, 120_000);

  it('migrates down to zero and back up', async () => {
    const db = store!.db;
    expect((await migrateTo(db, null)).ran).toEqual([...all].reverse());
    expect(await tables(store!)).toEqual([]);
    expect((await migrationStatus(db)).atHead).toBe(false);
    expect((await migrateToLatest(db)).applied).toEqual(all);
  });

  it('refuses a second open of the same directory while the first is open', async () => {
    const error = await embedded(dataDir).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as StoreUnavailableError).reason).toBe('locked');
  });

  it('serializes transactions: concurrent read-modify-write loses no update, and other queries wait for the transaction', async () => {
    const db = store!.db;
    const before = await policies.getPolicySetVersion(db);
    const order: string[] = [];
    const bump = (label: string) =>
      db.transaction().execute(async (trx) => {
        const { rows } = await sql<{ v: number }>`select version as v from policy_set_version`.execute(trx);
        order.push(`${label}:read`);
        await new Promise((resolve) => setTimeout(resolve, 30));
        await sql`update policy_set_version set version = ${rows[0]!.v + 1}`.execute(trx);
        order.push(`${label}:write`);
      });
    const outside = (async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      await sql`select 1`.execute(db);
      order.push('outside');
    })();
    await Promise.all([bump('a'), bump('b'), outside]);
    expect(await policies.getPolicySetVersion(db)).toBe(before + 2);
    // Each transaction ran whole; the plain query did not slip into the middle of one.
    expect(order).toEqual(['a:read', 'a:write', 'b:read', 'b:write', 'outside']);
  });

  it('indexes and searches document pages, best first, and follows a renamed source', async () => {
    const db = store!.db;
    await sql`insert into data_sources (source_id, name, source_type) values ('docs', 'docs', 'files')`.execute(db);
    const doc = { source_id: 'docs', path: 'a.txt', job_id: null, catalog_asset_id: null, content_type: 'text/plain', byte_size: 1, sha256: 'x',
      asset_version: null, page_count: 3, ocr_pages: 0, classification: {}, extract_chars: 1, extract_truncated: false, notes: [] };
    await saveDocument(db, doc, ['quokka single', `${'quokka '.repeat(9)}many`, 'red panda'].map((text, i) => ({ page_no: i + 1, text, ocr: false })));
    expect((await searchPages(db, 'quokka', ['docs'], 10)).map((h) => h.page_no)).toEqual([2, 1]);
    expect((await searchPages(db, '"red panda" or many', ['docs'], 10)).map((h) => h.page_no).sort()).toEqual([2, 3]);
    await sql`update data_sources set source_id = 'docs2' where source_id = 'docs'`.execute(db);
    expect(await searchPages(db, 'quokka', ['docs'], 10)).toEqual([]);
    expect((await searchPages(db, 'quokka -single', ['docs2'], 10)).map((h) => `${h.source_id}#${h.page_no}`)).toEqual(['docs2#2']);
  });

  it('keeps its data when the same directory is reopened', async () => {
    const created = await identities.createIdentity(store!.db, { name: 'persisted', metadata: { k: 'v' } });
    await store!.close();
    await expect(store!.ping()).rejects.toMatchObject({ reason: 'closed' });
    store = await embedded(dataDir);
    expect(await migrationStatus(store.db)).toMatchObject({ atHead: true, pending: [] });
    expect((await migrateToLatest(store.db)).applied).toEqual([]);
    expect(await identities.getIdentityById(store.db, created.id)).toMatchObject({ name: 'persisted', metadata: { k: 'v' } });
  });
});
