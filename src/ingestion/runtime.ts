// The ingestion runtime of a process, built once per composition root: the egress dispatcher (the proxy's rules) and the personal-data scanner that ingestion, sync and the document tools share.
import { createEgressDispatcher, type EgressDispatcher } from '../egress/agent.js';
import { createPiiScanner, piiOptionsFromConfig, type PiiScanner } from '../governance/pii/index.js';
import { perServices, type Services } from '../runtime/services.js';

export interface IngestionRuntime {
  egress: EgressDispatcher;
  pii: PiiScanner;
}

async function build(services: Services): Promise<IngestionRuntime> {
  const { config } = services;
  const allowPrivate = new Set(config.gateway.egress.allow_private_sources);
  const egressLog = services.log.child({ component: 'egress' });
  const egress = createEgressDispatcher({
    allowPrivate: (sourceId) => allowPrivate.has(sourceId),
    connectTimeoutMs: config.gateway.timeouts.upstream_connect_ms,
    // The same decisions and the same log lines as the proxy's egress (docs/egress.md).
    onDecision: (d) => {
      if (!d.allowed) egressLog.warn({ source_id: d.sourceId, host: d.hostname, range: d.range }, 'egress refused');
      else if (d.privateOverride) egressLog.info({ source_id: d.sourceId, host: d.hostname, range: d.range }, 'private egress allowed by gateway.egress.allow_private_sources');
    },
  });
  services.onClose(() => egress.close());
  return { egress, pii: createPiiScanner(piiOptionsFromConfig(config.pii)) };
}

export const ingestionRuntimeFor: (services: Services) => Promise<IngestionRuntime> = perServices(build);
