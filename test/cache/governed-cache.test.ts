// The governed cache on the real Redis and on the memory adapter: scope misses, L1/L2, cross-replica invalidation, barriers, TTLs, bounds, the generation floor.
import { afterEach, describe, expect, it } from 'vitest';
import type { CacheKey } from '../../src/cache/governed-cache.js';
import { cacheScopeKey, canonicalScope } from '../../src/governance/cache-scope.js';
import { MapDurable, memoryBackend, redisBackend, response, scope, sleep, startReplica, waitFor } from './support.js';
import type { Backend, Replica, ReplicaOptions } from './support.js';

for (const makeBackend of [memoryBackend, redisBackend] as const) {
  describe(`governed cache (${makeBackend === memoryBackend ? 'memory' : 'redis'})`, () => {
    let backend: Backend;
    const open: Replica[] = [];
    const replica = async (opts: ReplicaOptions = {}): Promise<Replica> => {
      backend ??= makeBackend();
      const r = await startReplica(backend.connect(), opts);
      open.push(r);
      return r;
    };
    afterEach(async () => {
      for (const r of open.splice(0)) await r.close();
      await backend?.cleanup();
      backend = undefined as unknown as Backend;
    });

    async function fill(r: Replica, s = scope(), text = '{"n":1}'): Promise<CacheKey> {
      const look = await r.cache.lookup(s);
      expect(look).toMatchObject({ hit: false, reason: 'not_found' });
      expect(look.key).not.toBeNull();
      expect(await r.cache.store(look.key, response(text))).toEqual({ stored: true });
      return look.key!;
    }

    it('hits for the same scope and misses for another identity, grant version, policy version, role decision or generation', async () => {
      const a = await replica();
      await fill(a);
      const hit = await a.cache.lookup(scope());
      expect(hit).toMatchObject({ hit: true, tier: 'l1' });
      expect(hit.hit && hit.entry.body.toString()).toBe('{"n":1}');

      for (const other of [
        scope({ identity_id: 2 }),
        scope({ team: 'support' }),
        scope({ grant_version: 2 }),
        scope({ mapped_pg_role: 'analyst' }),
        scope({ role_decision: { grant_id: 10, role_key: 'writer', rule_index: 0 } }),
        scope({ policy: { ...scope().policy, version: 2 } }),
        scope({ policy: { ...scope().policy, obligations: { redact_columns: ['*.email'], pii_mode: null, cache: true } } }),
        scope({ query: 'page=2' }),
      ]) {
        expect(await a.cache.lookup(other)).toMatchObject({ hit: false, reason: 'not_found' });
      }
      await a.cache.beforeWrite('crm');
      expect(await a.cache.lookup(scope())).toMatchObject({ hit: false, reason: 'not_found' });
    });

    it('serves L1 first, then L2 on another replica, which promotes it to its L1', async () => {
      const a = await replica();
      const b = await replica();
      const key = await fill(a);
      // L1 is keyed by the canonical scope at the generation, L2 by its SHA-256, the key every replica computes.
      expect(key.canonical).toBe(canonicalScope({ ...scope(), source_generation: key.generation }));
      expect(key.scope_key).toBe(cacheScopeKey({ ...scope(), source_generation: key.generation }));
      expect(await a.cache.lookup(scope())).toMatchObject({ hit: true, tier: 'l1', key });
      const fromL2 = await b.cache.lookup(scope());
      expect(fromL2).toMatchObject({ hit: true, tier: 'l2', key });
      expect(fromL2.hit && fromL2.entry).toMatchObject({ status: 200, headers: { 'content-type': 'application/json' } });
      expect(fromL2.hit && fromL2.entry.body.toString()).toBe('{"n":1}');
      expect(await b.cache.lookup(scope())).toMatchObject({ hit: true, tier: 'l1' });
      expect(b.cache.stats()).toMatchObject({ hits: 2, l1_hits: 1, l2_hits: 1, misses: 0, l1_entries: 1 });
    });

    it('keeps binary bodies intact through L2', async () => {
      const a = await replica();
      const b = await replica();
      const body = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const look = await a.cache.lookup(scope());
      await a.cache.store(look.key, { status: 203, headers: { etag: '"x"' }, body });
      const hit = await b.cache.lookup(scope());
      expect(hit.hit && hit.tier).toBe('l2');
      expect(hit.hit && hit.entry.body.equals(body)).toBe(true);
      expect(hit.hit && hit.entry.status).toBe(203);
    });

    it('a write on one replica makes the other miss and drop its L1 copy', async () => {
      const a = await replica();
      const b = await replica();
      await fill(a);
      await fill(a, scope({ source_id: 'billing' }));
      expect(await b.cache.lookup(scope())).toMatchObject({ hit: true, tier: 'l2' });
      expect(await b.cache.lookup(scope({ source_id: 'billing' }))).toMatchObject({ hit: true });
      expect(b.cache.stats().l1_entries).toBe(2);

      await a.cache.beforeWrite('crm');
      await a.cache.afterWrite('crm');
      await waitFor(() => b.cache.stats().remote_invalidations >= 2, 2000, 'invalidations on replica b');

      expect(b.cache.stats()).toMatchObject({ l1_entries: 1, invalidated_entries: 1 });
      expect(await b.cache.lookup(scope())).toMatchObject({ hit: false, reason: 'not_found' });
      expect(await a.cache.lookup(scope())).toMatchObject({ hit: false, reason: 'not_found' });
      // Other sources are untouched.
      expect(await b.cache.lookup(scope({ source_id: 'billing' }))).toMatchObject({ hit: true, tier: 'l1' });
      expect(a.cache.stats().invalidations).toBe(2);
    });

    it('without a memo the other replica misses at once, before any bus message', async () => {
      const a = await replica({ memoMs: 0 });
      const b = await replica({ memoMs: 0 });
      await fill(a);
      expect(await b.cache.lookup(scope())).toMatchObject({ hit: true });
      await a.cache.beforeWrite('crm');
      expect(await b.cache.lookup(scope())).toMatchObject({ hit: false, reason: 'not_found' });
    });

    it('an entry stored between the two barriers of a write is dead after it', async () => {
      const a = await replica();
      const reader = await replica({ memoMs: 0 });
      await a.cache.beforeWrite('crm');
      // A read that runs while the write executes upstream: it may see either state, and stores it.
      const during = await reader.cache.lookup(scope());
      expect(await reader.cache.store(during.key, response('{"maybe":"stale"}'))).toEqual({ stored: true });
      expect(await reader.cache.lookup(scope())).toMatchObject({ hit: true });
      await a.cache.afterWrite('crm');
      expect(await reader.cache.lookup(scope())).toMatchObject({ hit: false, reason: 'not_found' });
    });

    it('does not store an answer whose generation ended while the origin answered', async () => {
      const a = await replica();
      const b = await replica();
      const look = await b.cache.lookup(scope());
      await a.cache.beforeWrite('crm');
      await waitFor(() => b.cache.stats().remote_invalidations >= 1, 2000, 'invalidation on b');
      expect(await b.cache.store(look.key, response('{"old":true}'))).toEqual({ stored: false, reason: 'stale_generation' });
    });

    it('answers policy opt-outs and a disabled cache without touching the store', async () => {
      const a = await replica();
      const optOut = scope({ policy: { ...scope().policy, obligations: { redact_columns: [], pii_mode: null, cache: false } } });
      expect(await a.cache.lookup(optOut)).toEqual({ hit: false, reason: 'policy_opt_out', key: null });
      expect(await a.cache.store(null, response('x'))).toEqual({ stored: false, reason: 'no_key' });
      const off = await replica({ config: { enabled: false } });
      expect(await off.cache.lookup(scope())).toEqual({ hit: false, reason: 'disabled', key: null });
      await off.cache.beforeWrite('crm'); // no barrier when the cache is off
      expect(off.cache.stats().invalidations).toBe(0);
    });

    it('bounds entry size and L1 bytes', async () => {
      const a = await replica({ maxEntryBytes: 1000, config: { l1_max_bytes: 4 * 1024 } });
      const look = await a.cache.lookup(scope());
      expect(await a.cache.store(look.key, { status: 200, headers: {}, body: Buffer.alloc(1001) })).toEqual({ stored: false, reason: 'too_large' });
      expect(await a.cache.store(look.key, { status: 200, headers: {}, body: Buffer.alloc(1000) })).toEqual({ stored: true });
      for (let i = 0; i < 10; i++) {
        const k = await a.cache.lookup(scope({ query: `i=${i}` }));
        await a.cache.store(k.key, { status: 200, headers: {}, body: Buffer.alloc(1000) });
      }
      const stats = a.cache.stats();
      expect(stats.l1_bytes).toBeLessThanOrEqual(4 * 1024);
      expect(stats.l1_entries).toBeLessThan(11);
      expect(stats.evictions).toBeGreaterThan(0);
      // Evicted from L1, still in L2.
      expect(await a.cache.lookup(scope())).toMatchObject({ hit: true, tier: 'l2' });
      expect(await a.cache.store(look.key, { status: 500, headers: {}, body: Buffer.alloc(1) })).toEqual({ stored: false, reason: 'invalid' });
    });

    it('bounds L1 entries', async () => {
      const a = await replica({ config: { l1_max_entries: 3 } });
      for (let i = 0; i < 5; i++) {
        const k = await a.cache.lookup(scope({ query: `i=${i}` }));
        await a.cache.store(k.key, response(String(i)));
      }
      expect(a.cache.stats()).toMatchObject({ l1_entries: 3, evictions: 2 });
    });

    it('expires entries after their TTLs (the upstream max-age caps them further)', async () => {
      const a = await replica({ config: { l1_ttl_seconds: 1, l2_ttl_seconds: 1 } });
      const look = await a.cache.lookup(scope());
      await a.cache.store(look.key, response('short'));
      const capped = await a.cache.lookup(scope({ query: 'capped' }));
      await a.cache.store(capped.key, response('capped'), { ttlSeconds: 0.3 });
      expect(await a.cache.lookup(scope())).toMatchObject({ hit: true, tier: 'l1' });
      await sleep(400);
      expect(await a.cache.lookup(scope({ query: 'capped' }))).toMatchObject({ hit: false });
      expect(await a.cache.lookup(scope())).toMatchObject({ hit: true });
      await sleep(750);
      expect(await a.cache.lookup(scope())).toMatchObject({ hit: false, reason: 'not_found' });
    });

    it('never lets the generation go back: flush, rollback, junk and a fresh process are all raised past the floor', async () => {
      const durable = new MapDurable();
      const a = await replica({ durable, memoMs: 0 });
      const g0 = await a.generations.current('crm');
      expect(g0).toBeGreaterThanOrEqual(Date.now() - 60_000); // seeded at the clock floor
      const g1 = await a.generations.advance('crm');
      expect(g1).toBe(g0 + 1);
      expect(durable.values.get('crm')).toBe(g1);
      const key = await fill(a);
      expect(key.generation).toBe(g1);

      // A flush (or eviction) of the counter: re-seeded above everything used before.
      await backend.rawDelete('gen:crm');
      const afterFlush = await a.generations.current('crm');
      expect(afterFlush).toBeGreaterThan(g1);
      expect(await a.cache.lookup(scope())).toMatchObject({ hit: false });

      // A rollback (failover to a lagging replica): this process saw more, so it raises the counter.
      await backend.rawSet('gen:crm', String(g1));
      expect(await a.generations.current('crm')).toBeGreaterThan(afterFlush);

      // Junk in the counter key is replaced.
      await backend.rawSet('gen:crm', 'junk');
      const afterJunk = await a.generations.current('crm');
      expect(afterJunk).toBeGreaterThan(afterFlush);
      expect(await a.generations.advance('crm')).toBe(afterJunk + 1);

      // A fresh process that never saw any of it still has the durable floor.
      durable.values.set('crm', afterJunk + 1000);
      await backend.rawSet('gen:crm', '7');
      const fresh = await replica({ durable, memoMs: 0 });
      expect(await fresh.generations.current('crm')).toBeGreaterThan(afterJunk + 1000);

      // An advance whose INCR finds no key is raised too.
      await backend.rawDelete('gen:crm');
      expect(await fresh.generations.advance('crm')).toBeGreaterThan(afterJunk + 1000);
    });

    it('concurrent advances on two replicas stay strictly increasing and agree', async () => {
      const a = await replica();
      const b = await replica();
      await a.generations.current('crm');
      const values = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).generations.advance('crm')));
      expect(new Set(values).size).toBe(20);
      await waitFor(() => a.generations.highWater('crm') === Math.max(...values) && b.generations.highWater('crm') === Math.max(...values), 2000, 'both high-water marks');
    });
  });
}
