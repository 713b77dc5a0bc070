// The running build's version (package.json), for worker heartbeats; read once, from the source tree or from dist/.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | null = null;

export function serviceVersion(): string {
  if (cached) return cached;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'gatehouse' && typeof pkg.version === 'string') return (cached = pkg.version);
    } catch {
      // not here; look one level up
    }
    dir = path.dirname(dir);
  }
  return (cached = 'unknown');
}
