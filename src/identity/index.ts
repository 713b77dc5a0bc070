// The identity module's public face: agent keys, agent authentication and key sessions, built from the running services.
import type { Services } from '../runtime/services.js';
import type { AgentAuthDeps } from './authenticate.js';
import { KeySessionMemo } from './key-sessions.js';

export { authenticateAgent, bearerKey, toAgentIdentity, type AgentAuthDeps } from './authenticate.js';
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
