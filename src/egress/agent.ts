// SSRF-safe undici dispatchers: every connection resolves its host once, checks every answer against the egress policy, and connects to the checked address itself (spec §4 rule 5; docs/egress.md).
import { ttlCache } from '../util/ttl-cache.js';
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Agent, buildConnector } from 'undici';
import type { Dispatcher } from 'undici';
import { classifyAddress, parseHostLiteral } from './address.js';
import type { AddressClass } from './address.js';
import { EgressDeniedError, UpstreamError } from './errors.js';
import { translateUpstreamError } from './request.js';
import { withDeadline } from '../util/deadline.js';

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a host name to all of its addresses. Injectable so tests can script DNS answers. */
export type EgressLookup = (hostname: string) => Promise<ResolvedAddress[]>;

/** One egress decision, for logs and the audit trail (private egress use must be audited). */
export interface EgressDecision {
  sourceId: string;
  hostname: string;
  /** The address connected to, or the first offending one when refused. */
  address: string;
  range: string;
  allowed: boolean;
  /** True when only `gateway.egress.allow_private_sources` let this connection through. */
  privateOverride: boolean;
}

export interface EgressDispatcherOptions {
  /** Operator setting `gateway.egress.allow_private_sources`: may this source reach private ranges? */
  allowPrivate: (sourceId: string) => boolean;
  connectTimeoutMs: number;
  /** Defaults to the system resolver (`dns.lookup` with `all: true`). */
  lookup?: EgressLookup;
  /** Called for every connection decision, allowed or refused. Must not throw. */
  onDecision?: (decision: EgressDecision) => void;
  /** Idle keep-alive of pooled upstream connections (default 4 s, undici's). */
  keepAliveTimeoutMs?: number;
  /** Upper bound of connections per upstream origin per source (default unbounded, undici's). */
  connectionsPerOrigin?: number;
}

/** How long an allowed early check is reused (connections always check again). */
const PRECHECK_MEMO_MS = 5_000;

/** A resolver answering more than this many addresses is treated as hostile. */
const MAX_DNS_ANSWERS = 64;

export interface EgressDispatcher {
  /**
   * The dispatcher for one source. Sources get separate connection pools, so a connection admitted under one
   * source's private-egress setting is never reused by another source that lacks it.
   */
  forSource(sourceId: string): Dispatcher;
  /** Resolves and checks a host for a source exactly as a connection would, without connecting. */
  checkTarget(sourceId: string, hostname: string): Promise<{ address: string; decision: EgressDecision }>;
  /**
   * The early, per-request check of the pipeline (spec §4 step 6): checkTarget, with an allowed answer reused for
   * a few seconds so a named upstream costs no DNS lookup per request. It never decides what a connection
   * connects to: every new connection resolves and checks again (checkTarget), so a memoized answer cannot be
   * used for rebinding. Refusals are not memoized.
   */
  precheck(sourceId: string, hostname: string): Promise<void> | void;
  /** Drops a source's pool (source deleted or reconfigured). */
  evict(sourceId: string): Promise<void>;
  close(): Promise<void>;
}

const defaultLookup: EgressLookup = async (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/**
 * Builds the egress dispatcher. Redirects are never followed: no redirect interceptor is composed, so a 3xx comes
 * back to the caller as-is. DNS policy: the name is resolved once per connection; if ANY answer is forbidden the
 * connection is refused (a name that mixes a public and an internal address is treated as hostile), otherwise
 * the first answer is the one connected to — there is no second resolution for a rebinding attacker to win.
 */
export function createEgressDispatcher(options: EgressDispatcherOptions): EgressDispatcher {
  if (typeof options.allowPrivate !== 'function') throw new TypeError('allowPrivate must be a function');
  if (!Number.isInteger(options.connectTimeoutMs) || options.connectTimeoutMs <= 0) throw new TypeError('connectTimeoutMs must be a positive integer');
  const lookup = options.lookup ?? defaultLookup;
  const agents = new Map<string, Agent>();

  async function resolveBounded(hostname: string): Promise<ResolvedAddress[]> {
    try {
      return await withDeadline(lookup(hostname), options.connectTimeoutMs, () => {
        throw new UpstreamError('timed out');
      });
    } catch (err) {
      throw translateUpstreamError(err);
    }
  }

  function decide(sourceId: string, hostname: string, cls: AddressClass, address: string): EgressDecision {
    if (cls.allowed) return { sourceId, hostname, address, range: cls.range, allowed: true, privateOverride: false };
    const lifted = cls.privateOverridable && options.allowPrivate(sourceId);
    return { sourceId, hostname, address, range: cls.range, allowed: lifted, privateOverride: lifted };
  }

  function report(decision: EgressDecision): void {
    try {
      options.onDecision?.(decision);
    } catch {
      // A broken observer must not change the egress decision.
    }
  }

  async function checkTarget(sourceId: string, hostname: string): Promise<{ address: string; decision: EgressDecision }> {
    const literal = parseHostLiteral(hostname);
    if (literal.kind === 'invalid') {
      const decision: EgressDecision = { sourceId, hostname, address: '', range: literal.reason, allowed: false, privateOverride: false };
      report(decision);
      throw new EgressDeniedError({ range: literal.reason, hostname, address: '' });
    }
    // IP literals never reach a resolver (undici would not call one either): check them here, explicitly.
    const answers: ResolvedAddress[] =
      literal.kind === 'name' ? await resolveBounded(literal.name) : [{ address: literal.address, family: literal.kind === 'ipv4' ? 4 : 6 }];
    if (answers.length === 0) throw new UpstreamError('host not found');
    if (answers.length > MAX_DNS_ANSWERS) throw new EgressDeniedError({ range: 'too_many_answers', hostname, address: '' });

    let chosen: { address: string; decision: EgressDecision } | undefined;
    for (const answer of answers) {
      const cls = classifyAddress(answer.address);
      const decision = decide(sourceId, hostname, cls, answer.address);
      if (!decision.allowed) {
        report(decision);
        throw new EgressDeniedError({ range: cls.range, hostname, address: answer.address });
      }
      chosen ??= { address: cls.connectAddress, decision: { ...decision, address: cls.connectAddress } };
    }
    report(chosen!.decision);
    return chosen!;
  }

  function agentFor(sourceId: string): Agent {
    let agent = agents.get(sourceId);
    if (agent !== undefined) return agent;
    // allowH2 off on both sides: the connector must not offer h2 in ALPN that the client would not speak.
    const connectSocket = buildConnector({ timeout: options.connectTimeoutMs, allowH2: false });
    const connect: buildConnector.connector = (opts, callback) => {
      const hostname = opts.hostname;
      checkTarget(sourceId, hostname).then(
        ({ address }) => {
          // TLS keeps the original name for SNI and certificate checks; the socket goes to the checked address.
          const servername = isIP(hostname) === 0 ? (opts.servername ?? hostname) : undefined;
          connectSocket({ ...opts, hostname: address, ...(servername === undefined ? { servername: '' } : { servername }) }, callback);
        },
        (err: unknown) => callback(err as Error, null),
      );
    };
    agent = new Agent({
      connect,
      allowH2: false,
      ...(options.keepAliveTimeoutMs === undefined ? {} : { keepAliveTimeout: options.keepAliveTimeoutMs }),
      ...(options.connectionsPerOrigin === undefined ? {} : { connections: options.connectionsPerOrigin }),
    });
    agents.set(sourceId, agent);
    return agent;
  }

  const allowed = ttlCache<string, true>({ max: 10_000, ttl: PRECHECK_MEMO_MS });
  // A remembered allow answers synchronously: the pipeline then goes on without a microtask turn.
  function precheck(sourceId: string, hostname: string): Promise<void> | void {
    const key = `${sourceId}\u0000${hostname}`;
    if (allowed.get(key)) return;
    return checkTarget(sourceId, hostname).then(() => {
      allowed.set(key, true);
    });
  }

  return {
    forSource: agentFor,
    checkTarget,
    precheck,
    async evict(sourceId) {
      for (const key of allowed.keys()) if (key.startsWith(`${sourceId}\u0000`)) allowed.delete(key);
      const agent = agents.get(sourceId);
      agents.delete(sourceId);
      await agent?.close();
    },
    async close() {
      const all = [...agents.values()];
      agents.clear();
      await Promise.all(all.map((a) => a.close()));
    },
  };
}
