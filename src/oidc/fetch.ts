// Egress to the identity provider: discovery, JWKS and token requests go through the SSRF-safe dispatcher like every other outbound call (spec §4 rule 5; docs/egress.md).
import { fetch as undiciFetch } from 'undici';
import { createEgressDispatcher, type EgressDispatcher } from '../egress/agent.js';
import type { Logger } from '../observability/logger.js';

/** The egress "source" name the provider's connections are checked and logged under. */
export const OIDC_EGRESS_NAME = 'auth.oidc';

export type ProviderFetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

export interface ProviderEgress {
  fetch: ProviderFetch;
  close(): Promise<void>;
}

/**
 * A fetch whose connections reach only public addresses, unless auth.oidc.allow_private_network names the provider
 * as private. Redirects are never followed (a provider that redirects its discovery or keys is refused), and every
 * request is bounded by `timeoutMs`.
 */
export function providerEgress(opts: { allowPrivate: boolean; connectTimeoutMs: number; timeoutMs: number; log: Logger }): ProviderEgress {
  const dispatcher: EgressDispatcher = createEgressDispatcher({
    allowPrivate: () => opts.allowPrivate,
    connectTimeoutMs: opts.connectTimeoutMs,
    onDecision: (d) => {
      if (!d.allowed) opts.log.warn({ host: d.hostname, range: d.range }, 'egress to the identity provider refused (auth.oidc.allow_private_network)');
    },
  });
  const agent = dispatcher.forSource(OIDC_EGRESS_NAME);
  const fetch: ProviderFetch = async (url, init = {}) => {
    const signal = init.signal ? AbortSignal.any([init.signal, AbortSignal.timeout(opts.timeoutMs)]) : AbortSignal.timeout(opts.timeoutMs);
    // undici's own fetch takes its dispatcher; its Request/Response types are the platform's in shape.
    const res = await undiciFetch(url, { ...(init as object), signal, redirect: 'manual', dispatcher: agent } as Parameters<typeof undiciFetch>[1]);
    return res as unknown as Response;
  };
  return { fetch, close: () => dispatcher.close() };
}
