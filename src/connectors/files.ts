// The `files` connector: a directory the operator mounts, whose documents the worker ingests (docs/ingestion.md "files sources"); nothing is served from it directly.
import { access, constants, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { Connector, ConnectionTestResult } from './types.js';

export const filesConfigSchema = z.strictObject({
  /** Absolute directory; it must lie in one of `ingestion.files_roots` for the worker to read it. */
  root: z
    .string()
    .min(1)
    .max(4096)
    .refine((p) => path.isAbsolute(p) && path.normalize(p) === p.replace(/(.)\/+$/, '$1'), 'must be an absolute, normalized path'),
  /** Sync walks subdirectories too. */
  recursive: z.boolean().default(true),
  /** Sync stops counting assets past this many files. */
  max_files: z.number().int().min(1).max(10_000_000).default(100_000),
});

export type FilesConfig = z.output<typeof filesConfigSchema>;

async function testFiles(raw: Record<string, unknown>): Promise<ConnectionTestResult> {
  const started = performance.now();
  const elapsed = () => Math.round((performance.now() - started) * 100) / 100;
  const config = filesConfigSchema.parse(raw);
  try {
    const s = await stat(config.root);
    if (!s.isDirectory()) return { ok: false, latency_ms: elapsed(), error: 'root is not a directory' };
    await access(config.root, constants.R_OK | constants.X_OK);
    return { ok: true, latency_ms: elapsed(), error: null };
  } catch {
    return { ok: false, latency_ms: elapsed(), error: 'root cannot be read' };
  }
}

export const filesConnector: Connector = {
  key: 'files',
  name: 'Files (directory)',
  description: 'A directory mounted on the workers; its documents are ingested and read through the MCP document tools.',
  source_type: 'files',
  capabilities: ['documents'],
  active: true,
  configSchema: filesConfigSchema,
  credentials: [],
  test: testFiles,
};
