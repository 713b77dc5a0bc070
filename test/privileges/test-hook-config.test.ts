// The test-only hook that switches the gateway's SQL analysis off cannot be turned on outside environment test: startup fails naming it (fail closed).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { tempDirs } from '../config/helpers.js';

const dir = tempDirs();

describe('gateway.test_hooks.skip_sql_analysis', () => {
  it.each(['development', 'production'])('is refused with environment %s', (environment) => {
    const r = loadConfig({ cwd: dir(), env: { SERVICE_ENVIRONMENT: environment, SERVICE_GATEWAY__TEST_HOOKS__SKIP_SQL_ANALYSIS: 'true' } });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems.some((p) => p.startsWith('gateway.test_hooks.skip_sql_analysis: test-only'))).toBe(true);
  });

  it('is accepted in environment test and off by default everywhere', () => {
    const on = loadConfig({ cwd: dir(), env: { SERVICE_ENVIRONMENT: 'test', SERVICE_GATEWAY__TEST_HOOKS__SKIP_SQL_ANALYSIS: 'true' } });
    expect(on.ok && on.config.gateway.test_hooks.skip_sql_analysis).toBe(true);
    const off = loadConfig({ cwd: dir(), env: { SERVICE_ENVIRONMENT: 'development' } });
    expect(off.ok && off.config.gateway.test_hooks.skip_sql_analysis).toBe(false);
  });
});
