// Agent JWT authentication (spec §5.4, §5.6): a bearer JWT of the configured issuer, verified against its JWKS, identifies the pre-provisioned identity mapped to its subject.
import { hash } from 'node:crypto';
import { ttlCache } from '../util/ttl-cache.js';
import { BoundedMemo } from '../util/bounded-memo.js';
import { errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { GatehouseError } from '../errors/registry.js';
import { getIdentityBySubject } from '../store/repos/oidc-subjects.js';
import { translateConnectionError } from '../store/errors.js';
import type { Db } from '../store/repos/util.js';
import type { Logger } from '../observability/logger.js';
import { toAgentIdentity } from './authenticate.js';
import type { AgentIdentity, KeyRevocationFeed } from './key-sessions.js';

/**
 * Signature algorithms accepted for agent JWTs: asymmetric only. `none` is never a signature, and an HS* token would
 * be "verified" with the provider's public key as an HMAC secret, which anyone can read from the JWKS.
 */
export const AGENT_JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'] as const;

/** Longest JWT read (a header line of 8 KiB holds far less). */
export const MAX_AGENT_JWT_LENGTH = 8_192;
/** How long an identity found by subject is reused; revocations (identity or mapping changes) drop it at once. */
const IDENTITY_MEMO_MS = 1_000;
/** A JWT's shape: three base64url segments, the first two of at least two characters. */
const JWT_SEGMENTS = String.raw`[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*`;
const JWT_SHAPE = new RegExp(`^${JWT_SEGMENTS}$`);
/** `Bearer ` (any case) and a JWT's shape, read in one pass over the header: the token is most of a JWT hit's bytes. */
const BEARER_JWT = new RegExp(`^Bearer (${JWT_SEGMENTS})$`, 'i');

/**
 * Whether a bearer credential is a JWT rather than an API key: three base64url segments whose first decodes to a JSON
 * object with an `alg`. Generated API keys never have that shape.
 */
export function looksLikeJwt(token: string): boolean {
  if (token.length > MAX_AGENT_JWT_LENGTH || !JWT_SHAPE.test(token)) return false;
  return hasJwtHeader(token);
}

/**
 * The JWT of an `Authorization: Bearer <JWT>` header (looksLikeJwt's rule), or null: any other header, an API key
 * among them, is not one.
 */
export function bearerJwt(header: string | undefined): string | null {
  if (typeof header !== 'string' || header.length > 'Bearer '.length + MAX_AGENT_JWT_LENGTH) return null;
  const token = BEARER_JWT.exec(header)?.[1];
  return token !== undefined && hasJwtHeader(token) ? token : null;
}

/** Whether the first segment of a JWT-shaped token decodes to a JOSE header (a JSON object with a string `alg`). */
function hasJwtHeader(token: string): boolean {
  const segment = token.slice(0, token.indexOf('.'));
  const known = jwtHeaders.get(segment);
  if (known !== undefined) return known;
  // Kept as a copy of its own: the slice would keep the whole token (a credential) alive with it. The shape check
  // admits only base64url characters, which latin1 carries unchanged.
  return jwtHeaders.keep(Buffer.from(segment, 'latin1').toString('latin1'), isJwtHeader(segment));
}

/**
 * Header segments already read: a provider signs its tokens with a handful of headers (`alg`, `kid`), so each bearer
 * JWT would otherwise decode and parse the same one again (docs/decisions/0011, "the hit with a JWT"). The answer is a
 * function of the segment alone. Bounded by count and length; cleared when full.
 */
const jwtHeaders = new BoundedMemo<boolean>(256, 1_024);

function isJwtHeader(segment: string): boolean {
  try {
    const header: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return header !== null && typeof header === 'object' && typeof (header as { alg?: unknown }).alg === 'string';
  } catch {
    return false;
  }
}

export interface AgentJwtDeps {
  db: Db;
  issuer: string;
  audience: string;
  clockToleranceSeconds: number;
  /** Oldest token accepted, counted from its `iat` (auth.oidc.agent_max_token_age_seconds). */
  maxTokenAgeSeconds: number;
  /** The provider's JWKS resolver; null until discovery succeeded (then JWTs answer 503, fail closed). */
  keys: () => JWTVerifyGetKey | null;
  /** Revocations (identity, grant or mapping changes) drop remembered identities. */
  feed?: KeyRevocationFeed | undefined;
  log: Logger;
}

/** Why a JWT was refused, for logs and the audit reasons; never the token. */
function refusal(reason: string, cause?: unknown): GatehouseError {
  return new GatehouseError('unauthenticated', undefined, { details: { credential: 'jwt', reason }, ...(cause === undefined ? {} : { cause }) });
}

/** The audit reason of a refused agent JWT (`jwt expired`, `jwt claim aud invalid`, ...), or null for any other error. */
export function jwtRefusalReason(err: unknown): string | null {
  if (!(err instanceof GatehouseError) || err.code !== 'unauthenticated' || err.details?.credential !== 'jwt') return null;
  return typeof err.details.reason === 'string' ? `jwt ${err.details.reason}` : null;
}

function reasonOf(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'expired';
  if (err instanceof joseErrors.JWTClaimValidationFailed) return `claim ${err.claim} invalid`;
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return 'algorithm not allowed';
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'signature invalid';
  if (err instanceof joseErrors.JWKSNoMatchingKey) return 'no matching key';
  if (err instanceof joseErrors.JWKSMultipleMatchingKeys) return 'ambiguous key';
  if (err instanceof joseErrors.JWSInvalid || err instanceof joseErrors.JWTInvalid) return 'malformed';
  return 'verification failed';
}

/**
 * When a verified token stops being accepted: its `exp` or the end of its maximum age, whichever is first, plus the
 * clock tolerance. The memo of verified tokens and the wire session's end both use it (docs/agent-jwt.md).
 */
export function validUntilMs(payload: JWTPayload, limits: { clockToleranceSeconds: number; maxTokenAgeSeconds: number }): number {
  // jose compares whole seconds: `exp` fails from exp + tolerance on, the age from iat + max + tolerance + 1 on.
  return Math.min(payload.exp! + limits.clockToleranceSeconds, payload.iat! + limits.maxTokenAgeSeconds + limits.clockToleranceSeconds + 1) * 1000;
}

/** A verified JWT, remembered until it expires: its subject. */
interface Verified {
  sub: string;
  expMs: number;
}

export class AgentJwtAuthenticator {
  readonly #deps: AgentJwtDeps;
  /** Verified JWTs by the SHA-256 of the token (the token itself is not kept), until their `exp`. */
  readonly #verified = ttlCache<string, Verified>({ max: 50_000, ttlAutopurge: false });
  readonly #identities = ttlCache<string, AgentIdentity>({ max: 50_000, ttl: IDENTITY_MEMO_MS });
  #revision = 0;

  constructor(deps: AgentJwtDeps) {
    this.#deps = deps;
    deps.feed?.onRevoked(() => {
      this.#revision++;
      this.#identities.clear();
    });
  }

  /**
   * The identity a JWT identifies. Rejects with GatehouseError 'unauthenticated' (401 / 28P01) or 'unavailable' (503).
   * A token verified before whose identity is remembered is answered by one settled promise, without an async frame.
   */
  authenticate(token: string): Promise<AgentIdentity> {
    // The one-shot digest: a Hash object per request cost more than the digest itself.
    const digest = hash('sha256', token, 'base64url');
    const now = Date.now();
    const verified = this.#verified.get(digest);
    if (verified === undefined || verified.expMs <= now) return this.#verifyThenIdentify(token, digest, now);
    const remembered = this.#remembered(verified.sub);
    return remembered !== undefined ? Promise.resolve(remembered) : this.#identity(verified.sub);
  }

  async #verifyThenIdentify(token: string, digest: string, now: number): Promise<AgentIdentity> {
    const verified = await this.#verify(token);
    this.#verified.set(digest, verified, { ttl: Math.max(1, verified.expMs - now) });
    return this.#identity(verified.sub);
  }

  async #verify(token: string): Promise<Verified> {
    const keys = this.#deps.keys();
    if (keys === null) throw new GatehouseError('unavailable', 'The identity provider is not reachable yet.');
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, keys, {
        issuer: this.#deps.issuer,
        audience: this.#deps.audience,
        algorithms: [...AGENT_JWT_ALGORITHMS],
        clockTolerance: this.#deps.clockToleranceSeconds,
        requiredClaims: ['exp', 'sub', 'iat'],
        // With a maximum age jose also refuses an `iat` in the future beyond the clock tolerance.
        maxTokenAge: this.#deps.maxTokenAgeSeconds,
      }));
    } catch (err) {
      // A JWKS that cannot be fetched is the provider's outage, not the agent's fault: 503, fail closed.
      if (err instanceof joseErrors.JWKSTimeout || (err instanceof Error && err.name === 'TypeError')) throw new GatehouseError('unavailable', 'The identity provider is not reachable.', { cause: err });
      throw refusal(reasonOf(err), err);
    }
    // spec §5.6: a token with several audiences must name the configured one as its authorized party.
    if (Array.isArray(payload.aud) && payload.aud.length > 1 && payload.azp !== this.#deps.audience) throw refusal('several audiences without a matching azp');
    // OIDC Core §3.1.3.7 item 5: an `azp` that is present names the party the token was issued to — on a
    // single-audience token too. Another party's token is not ours to accept.
    if (payload.azp !== undefined && payload.azp !== this.#deps.audience) throw refusal('azp names another party');
    const sub = payload.sub!;
    if (sub.length < 1 || sub.length > 512) throw refusal('subject outside 1..512 characters');
    return { sub, expMs: validUntilMs(payload, this.#deps) };
  }

  /** The identity remembered for a subject: only while revocations reach this process; otherwise every request reads the control store (as key sessions do). */
  #remembered(sub: string): AgentIdentity | undefined {
    return this.#deps.feed?.live ? this.#identities.get(sub) : undefined;
  }

  async #identity(sub: string): Promise<AgentIdentity> {
    const remembered = this.#remembered(sub);
    if (remembered !== undefined) return remembered;
    const revision = this.#revision;
    let row;
    try {
      row = await getIdentityBySubject(this.#deps.db, this.#deps.issuer, sub);
    } catch (err) {
      throw new GatehouseError(translateConnectionError(err, null) ? 'unavailable' : 'internal', undefined, { cause: err });
    }
    // Never provisioned from a token: an unmapped subject is refused like a wrong key (spec §5.4).
    if (!row) throw refusal('subject not mapped to an identity');
    if (!row.enabled) throw refusal('identity disabled');
    const identity = toAgentIdentity(row);
    if (revision === this.#revision && (this.#deps.feed?.live ?? false)) this.#identities.set(sub, identity);
    return identity;
  }
}
