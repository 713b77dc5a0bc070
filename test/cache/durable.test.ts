// The durable generation floor on the real control store: data_sources.generation only moves up and follows every advance.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeDurableGenerations } from '../../src/cache/generations.js';
import { createDataSource } from '../../src/store/repos/data-sources.js';
import { withMigratedStore } from '../support/pg.js';
import type { MigratedStore } from '../support/pg.js';
import { redisBackend, scope, startReplica } from './support.js';
import type { Backend, Replica } from './support.js';

describe('durable cache generations', () => {
  let pg: MigratedStore;
  let backend: Backend;
  const open: Replica[] = [];
  beforeAll(async () => {
    pg = await withMigratedStore({ poolMax: 2 });
    backend = redisBackend();
    await createDataSource(pg.store.db, { source_id: 'crm', name: 'CRM', source_type: 'http' });
  });
  afterAll(async () => {
    for (const r of open) await r.close();
    await backend?.cleanup();
    await pg?.cleanup();
  });

  it('reads the column, raises it with GREATEST, never lowers it, ignores unknown sources', async () => {
    const durable = storeDurableGenerations(pg.store.db);
    expect(await durable.read('crm')).toBe(1);
    await durable.raise('crm', 1_000);
    await durable.raise('crm', 10);
    expect(await durable.read('crm')).toBe(1_000);
    expect(await durable.read('nope')).toBeUndefined();
    await expect(durable.raise('nope', 5)).resolves.toBeUndefined();
  });

  it('records every advance, and a new process starts above it after the counter is lost', async () => {
    const durable = storeDurableGenerations(pg.store.db);
    const a = await startReplica(backend.connect(), { durable });
    open.push(a);
    const look = await a.cache.lookup(scope());
    await a.cache.beforeWrite('crm');
    await a.cache.afterWrite('crm');
    const advanced = a.generations.highWater('crm');
    expect(advanced).toBe(look.key!.generation + 2);
    expect(await durable.read('crm')).toBe(advanced);

    await backend.rawDelete('gen:crm');
    const fresh = await startReplica(backend.connect(), { durable });
    open.push(fresh);
    expect(await fresh.generations.current('crm')).toBeGreaterThan(advanced);
  });
});
