// The identity module's public face: agent keys, agent authentication and key sessions, built from the running services.
import type { Services } from '../runtime/services.js';
import type { AgentAuthDeps } from './authenticate.js';
import type { AgentIdentity } from './key-sessions.js';
import { KeySessionMemo } from './key-sessions.js';
import { AgentJwtAuthenticator, bearerJwt } from './agent-jwt.js';
import { authenticateAgent } from './authenticate.js';
import { oidcProviderOf } from '../oidc/index.js';

export { authenticateAgent, bearerKey, toAgentIdentity, type AgentAuthDeps } from './authenticate.js';
export { AgentJwtAuthenticator, looksLikeJwt, validUntilMs, AGENT_JWT_ALGORITHMS, type AgentJwtDeps } from './agent-jwt.js';
export {
  revokeKeySessions,
  revokeIdentityKeySessions,
  keySessionKey,
  KeySessionMemo,
  type AgentIdentity,
  type KeyRevocation,
  type KeyRevocationFeed,
  type KeySessionDeps,
} from './key-sessions.js';
export {
  generateApiKey,
  digestApiKey,
  legacyDigest,
  customKeyProblem,
  estimateEntropyBits,
  scramVerifier,
  parseScramVerifier,
  scramPasswordMatches,
  keyMaterial,
  GENERATED_KEY_PREFIX,
  MAX_API_KEY_LENGTH,
  type CustomKeyPolicy,
  type ParsedScramVerifier,
} from './keys.js';

const memos = new WeakMap<object, KeySessionMemo>();

/**
 * The process's key-session memo, subscribed to revocations. Only processes that authenticate agents at volume
 * (the gateway) start it; everyone else revokes through the coordination store and the broadcast.
 */
export async function startKeySessionMemo(services: Pick<Services, 'coord' | 'onClose' | 'config'>): Promise<KeySessionMemo> {
  let memo = memos.get(services);
  if (memo === undefined) {
    memo = new KeySessionMemo(services.coord, services.config.auth.key_session_ttl_seconds);
    memos.set(services, memo);
    await memo.start();
    const started = memo;
    services.onClose(() => started.stop());
  }
  return memo;
}

/** The dependencies of authenticateAgent and the key-session revokers, from the composition root's services. */
export function agentAuthDeps(services: Pick<Services, 'db' | 'coord' | 'log' | 'config' | 'secrets'>): AgentAuthDeps {
  return {
    memo: memos.get(services),
    db: services.db,
    coord: services.coord,
    log: services.log.child({ component: 'agent-auth' }),
    ttlSeconds: services.config.auth.key_session_ttl_seconds,
    pepper: services.secrets.get('auth.api_key_pepper_ref'),
    legacyAllowed: services.config.auth.legacy_unpeppered_keys_allowed,
  };
}

const jwtAuthenticators = new WeakMap<object, AgentJwtAuthenticator | null>();

/**
 * The process's agent-JWT authenticator, or null when agents cannot present JWTs here (auth.oidc disabled, no
 * agent_audience, or the provider not started in this process). One per composition root, sharing the key-session
 * memo's revocation feed.
 */
export function agentJwtAuthenticator(services: Pick<Services, 'db' | 'log' | 'config'>): AgentJwtAuthenticator | null {
  if (jwtAuthenticators.has(services)) return jwtAuthenticators.get(services)!;
  const settings = services.config.auth.oidc;
  const provider = oidcProviderOf(services);
  let authenticator: AgentJwtAuthenticator | null = null;
  if (settings.enabled && settings.agent_audience !== null && provider !== null) {
    authenticator = new AgentJwtAuthenticator({
      db: services.db,
      issuer: provider.issuer,
      audience: settings.agent_audience,
      clockToleranceSeconds: settings.clock_tolerance_seconds,
      maxTokenAgeSeconds: settings.agent_max_token_age_seconds,
      keys: () => provider.keys(),
      feed: memos.get(services),
      log: services.log.child({ component: 'agent-jwt' }),
    });
  }
  jwtAuthenticators.set(services, authenticator);
  return authenticator;
}

/**
 * Authenticates an agent's `Authorization` header on every front door (spec §5.1, §5.4): a bearer JWT goes to the
 * JWT authenticator when one is configured, anything else is an API key.
 */
export function agentAuthenticator(services: Pick<Services, 'db' | 'coord' | 'log' | 'config' | 'secrets'>): (authorization: string | undefined) => Promise<AgentIdentity> {
  const keyDeps = agentAuthDeps(services);
  const jwt = agentJwtAuthenticator(services);
  if (jwt === null) return (authorization) => authenticateAgent(keyDeps, authorization);
  return (authorization) => {
    const token = bearerJwt(authorization);
    return token !== null ? jwt.authenticate(token) : authenticateAgent(keyDeps, authorization);
  };
}
