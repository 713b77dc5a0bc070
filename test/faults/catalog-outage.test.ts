// Prevents a control-store outage longer than the catalog view's lifetime from refusing every request: the last
// classifications read are served while the store is down, but never after an announced change or with changes inaudible.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CatalogGovernance } from '../../src/catalog/governance.js';
import { startFaultWorld, type FaultWorld } from './support.js';

let fw: FaultWorld;
beforeAll(async () => {
  fw = await startFaultWorld();
}, 60_000);
afterAll(async () => fw?.stop());

it('serves the last classifications during an outage only while changes can be heard and none was announced', async () => {
  const db = fw.world.svc.running.services.db;
  let audible = true;
  // Lifetime 0: every read goes to the store, as one would after CATALOG_VIEW_TTL_MS.
  const view = new CatalogGovernance(db, null, 0, () => audible);
  const before = await view.get('up');
  expect(await view.get('up')).toEqual(before);

  await fw.cluster.kill();
  expect(await view.get('up')).toBe(before);
  audible = false;
  await expect(view.get('up')).rejects.toThrow();
  audible = true;
  expect(await view.get('up')).toBe(before);
  view.invalidate('up');
  await expect(view.get('up')).rejects.toThrow();
  await expect(new CatalogGovernance(db, null, 0, () => true).get('up')).rejects.toThrow();
}, 60_000);
