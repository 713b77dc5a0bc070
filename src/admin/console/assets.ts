// The console's static assets, served by Gatehouse itself (no CDN): our stylesheet and script, plus htmx and uPlot vendored from their npm packages.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

const require = createRequire(import.meta.url);

/** The assets folder beside this module in src/, also when running from dist/ (the build does not copy non-TS files). */
function ownAssetsDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const parts = here.split(path.sep);
  const dist = parts.lastIndexOf('dist');
  // dist/admin/console → src/admin/console (tsconfig.build.json: rootDir src, outDir dist)
  if (dist >= 0) return path.join(parts.slice(0, dist).join(path.sep) || path.sep, 'src', ...parts.slice(dist + 1), 'assets');
  return path.join(here, 'assets');
}

/** Name in the URL → file on disk. A fixed list: nothing else under any folder can be asked for. */
function assetFiles(): Record<string, { file: string; type: string }> {
  const own = ownAssetsDir();
  return {
    'console.css': { file: path.join(own, 'console.css'), type: 'text/css; charset=utf-8' },
    'console.js': { file: path.join(own, 'console.js'), type: 'text/javascript; charset=utf-8' },
    'htmx.min.js': { file: require.resolve('htmx.org/dist/htmx.min.js'), type: 'text/javascript; charset=utf-8' },
    'uPlot.min.js': { file: require.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
    'uPlot.min.css': { file: require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css; charset=utf-8' },
  };
}

let loaded: Map<string, Asset> | null = null;

function assets(): Map<string, Asset> {
  if (loaded) return loaded;
  const map = new Map<string, Asset>();
  for (const [name, { file, type }] of Object.entries(assetFiles())) {
    const body = readFileSync(file);
    map.set(name, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` });
  }
  loaded = map;
  return map;
}

/** `/console/assets/<name>?v=<etag>`: the version makes a changed asset a new URL, so long caching is safe. */
export function assetUrl(name: string): string {
  const asset = assets().get(name);
  if (!asset) throw new TypeError(`unknown console asset ${name}`);
  return `/console/assets/${name}?v=${asset.etag.slice(1, 9)}`;
}

export const ASSET_ROUTE = '/console/assets/:name';

export function registerAssetRoutes(app: FastifyInstance): void {
  assets();
  app.get(ASSET_ROUTE, async (req, reply) => {
    const { name } = req.params as { name: string };
    const asset = assets().get(name);
    if (!asset) return reply.code(404).type('text/plain; charset=utf-8').send('Not found');
    if (req.headers['if-none-match'] === asset.etag) return reply.code(304).header('etag', asset.etag).send();
    return reply.type(asset.type).header('etag', asset.etag).header('cache-control', 'public, max-age=86400').send(asset.body);
  });
}
