// When the worker scans a source: on save (scan_on_save), on demand, and when the refresh interval has passed; never a disabled source or one with nothing to capture.
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/index.js';
import { dueTrigger } from '../../src/catalog/scheduler.js';
import type { DueSource } from '../../src/store/repos/catalog.js';

const config = configSchema.parse({}).catalog;
const now = new Date('2026-01-02T00:00:00Z');
const hoursAgo = (h: number) => new Date(now.getTime() - h * 3_600_000);
const base: DueSource = {
  source_id: 's', source_type: 'postgres', connector_key: null, enabled: true, connection_config: {},
  updated_at: hoursAgo(48), scan_requested_at: null, last_started_at: hoursAgo(1), last_source_updated_at: hoursAgo(48),
};

describe('dueTrigger', () => {
  it('a source never scanned is scanned as saved', () => {
    expect(dueTrigger({ ...base, last_started_at: null, last_source_updated_at: null }, config, now)).toBe('save');
    expect(dueTrigger({ ...base, last_started_at: null, last_source_updated_at: null }, { ...config, scan_on_save: false }, now)).toBe('schedule');
  });
  it('a source saved since its last scan is due when scan_on_save is on', () => {
    expect(dueTrigger({ ...base, updated_at: hoursAgo(0.5) }, config, now)).toBe('save');
    expect(dueTrigger({ ...base, updated_at: hoursAgo(0.5) }, { ...config, scan_on_save: false }, now)).toBeNull();
  });
  it('an on-demand request newer than the last scan start wins', () => {
    expect(dueTrigger({ ...base, scan_requested_at: hoursAgo(0.1) }, config, now)).toBe('demand');
    expect(dueTrigger({ ...base, scan_requested_at: hoursAgo(2) }, config, now)).toBeNull();
  });
  it('the refresh interval (default 86400 s) schedules a scan', () => {
    expect(config.refresh_interval_seconds).toBe(86_400);
    expect(dueTrigger({ ...base, last_started_at: hoursAgo(23.9) }, config, now)).toBeNull();
    expect(dueTrigger({ ...base, last_started_at: hoursAgo(24) }, config, now)).toBe('schedule');
    expect(dueTrigger({ ...base, last_started_at: hoursAgo(0.25) }, { ...config, refresh_interval_seconds: 900 }, now)).toBe('schedule');
  });
  it('the refresh interval may not go below 900 s', () => {
    expect(configSchema.safeParse({ catalog: { refresh_interval_seconds: 899 } }).success).toBe(false);
  });
  it('never a disabled source, nor an HTTP source without openapi_path', () => {
    expect(dueTrigger({ ...base, enabled: false, last_started_at: null }, config, now)).toBeNull();
    expect(dueTrigger({ ...base, source_type: 'http', last_started_at: null }, config, now)).toBeNull();
    expect(dueTrigger({ ...base, source_type: 'http', connection_config: { openapi_path: '/openapi.json' }, last_started_at: null, last_source_updated_at: null }, config, now)).toBe('save');
  });
});
