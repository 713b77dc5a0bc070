// Development secrets: generated once and said so; read back on the next start without claiming they were generated again.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { runtimeSecrets } from '../../src/runtime/dev-secrets.js';

let dir: string | undefined;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

function startOnce(stateDir: string): { messages: string[]; pepper: string } {
  const loaded = loadConfig({ env: { SERVICE_ENVIRONMENT: 'development' }, cwd: stateDir });
  if (!loaded.ok) throw new Error(loaded.problems.join('\n'));
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const log = createLogger({ level: 'info', service: 'test', role: 'all', destination });
  const secrets = runtimeSecrets(loaded.config, loaded.secrets, log, stateDir);
  return { messages: lines.map((l) => (JSON.parse(l) as { msg: string }).msg), pepper: secrets.get('auth.api_key_pepper_ref') };
}

describe('development secrets', () => {
  it('are announced as generated on the first start only; later starts say they were read back', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'gh-devsecrets-'));
    const first = startOnce(dir);
    expect(first.messages.filter((m) => m.startsWith('development secrets generated'))).toHaveLength(1);
    const second = startOnce(dir);
    expect(second.pepper).toBe(first.pepper);
    expect(second.messages.filter((m) => m.includes('generated'))).toEqual([]);
    expect(second.messages).toEqual([expect.stringMatching(/^development secrets read from the state directory/)]);
  });
});
