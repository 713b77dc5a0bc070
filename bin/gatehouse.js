#!/usr/bin/env node
// Launcher for the `gatehouse` command: runs the built CLI on Node 24, re-executing with the project's pinned Node when started by an older system Node.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const entry = path.join(here, '..', 'dist', 'main.js');
const major = Number(process.versions.node.split('.')[0]);

if (!existsSync(entry)) {
  console.error('gatehouse: dist/main.js is missing; run `npm run build` first');
  process.exit(1);
}

if (major < 24) {
  let nodeBin;
  try {
    const require = createRequire(import.meta.url);
    nodeBin = path.join(path.dirname(require.resolve('node/package.json')), 'bin', 'node');
  } catch {
    nodeBin = undefined;
  }
  if (!nodeBin || !existsSync(nodeBin)) {
    console.error(`gatehouse: Node.js 24 is required (running ${process.versions.node}); run \`npm install\` to fetch the pinned runtime`);
    process.exit(1);
  }
  const result = spawnSync(nodeBin, [entry, ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(result.status ?? 1);
}

await import(pathToFileURL(entry).href);
