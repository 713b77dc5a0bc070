// Starts OpenTelemetry export when observability.otlp_endpoint is set; with it unset the SDK is not even loaded (spec §9: nothing is exported).
import { createRequire } from 'node:module';
import type { Config } from '../config/index.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';
import type { Telemetry } from './telemetry.js';

function packageVersion(): string {
  const require = createRequire(import.meta.url);
  for (const candidate of ['../../package.json', '../package.json']) {
    try {
      return (require(candidate) as { version: string }).version;
    } catch {
      // dist/ and src/ sit at different depths below the package root.
    }
  }
  return 'unknown';
}

export async function startTelemetry(config: Readonly<Config>, opts: { role: string; instanceId: string; metrics: Metrics; log: Logger }): Promise<Telemetry | null> {
  const endpoint = config.observability.otlp_endpoint;
  if (endpoint === null) return null;
  const { Telemetry } = await import('./telemetry.js');
  const telemetry = Telemetry.start(
    {
      endpoint,
      serviceName: config.observability.service_name,
      role: opts.role,
      instanceId: opts.instanceId,
      version: packageVersion(),
      metricsIntervalMs: config.observability.metrics_export_interval_ms,
      sampleRatio: config.observability.trace_sample_ratio,
      maxTracesPerSecond: config.observability.trace_max_per_second,
    },
    opts.metrics,
  );
  // The endpoint may carry credentials in its userinfo: only its origin is logged.
  opts.log.info({ otlp: new URL(endpoint).origin }, 'OpenTelemetry export started (OTLP/HTTP traces and metrics)');
  return telemetry;
}
