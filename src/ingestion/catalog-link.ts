// The link of a document to its catalog asset (docs/ingestion.md "Index and documents"): the GET operation of the source's captured OpenAPI structure whose path template serves the document's path.
import { templateMatcher } from '../catalog/governance.js';
import type { CatalogStructure } from '../catalog/model.js';
import { latestStructure } from '../store/repos/catalog.js';
import type { DataSource } from '../store/schema.js';
import type { Db } from '../store/repos/util.js';

/** How many template variables a path has: fewer means more specific (`/docs/handbook.pdf` over `/docs/{name}`). */
const variables = (template: string) => (template.match(/\{[^}/]+\}/g) ?? []).length;

/**
 * The catalog path (`GET /docs/{name}`, docs/catalog.md "Drift") of the operation a GET of `filePath` reaches — the
 * same template matching the proxy applies to operation classifications — or null when the structure has none. The
 * most specific operation wins: fewest template variables, then the longest template. Pure.
 */
export function catalogAssetFor(structure: Pick<CatalogStructure, 'kind' | 'operations'> | null, filePath: string): string | null {
  if (structure === null || structure.kind !== 'openapi') return null;
  const path = `/${filePath}`;
  let best: { path: string; vars: number } | null = null;
  for (const op of structure.operations) {
    if (op.method !== 'GET' || !templateMatcher(op.path)(path)) continue;
    const vars = variables(op.path);
    if (best === null || vars < best.vars || (vars === best.vars && op.path.length > best.path.length)) best = { path: op.path, vars };
  }
  return best === null ? null : `GET ${best.path}`;
}

/** The catalog asset of a document of `source`, from the newest successful catalog snapshot; null for sources the catalog records no operations of. */
export async function catalogAssetOf(db: Db, source: DataSource, filePath: string): Promise<string | null> {
  if (source.source_type !== 'http') return null;
  const latest = await latestStructure(db, source.source_id);
  if (latest === undefined) return null;
  return catalogAssetFor(latest.structure as unknown as CatalogStructure, filePath);
}
