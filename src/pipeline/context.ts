// The GovernedRequest every front door builds, the dependencies the stages use, and the outcomes a stage may end a request with.
import type { AuditContext } from '../audit/context.js';
import type { AgentIdentity } from '../identity/index.js';
import type { RegisteredSource } from '../registry/sources.js';
import type { SourceRoleDecision, Grant, SourceRole } from '../governance/source-roles.js';
import type { CompiledPolicySet, Decision, Operation } from '../governance/policy/index.js';
import type { SqlClassification, SqlClassifier } from '../governance/sql/index.js';
import type { StructureProvider } from '../governance/sql/structure.js';
import type { ColumnAnalysis } from '../governance/sql/result-columns.js';
import type { PiiScanner } from '../governance/pii/index.js';
import type { CallTrust } from '../governance/sql/source-calls.js';
import type { PlacedUrl } from '../governance/http-path.js';
import type { PathResolution } from '../governance/sql/search-path.js';
import type { RiskAssessment, TableEffect, WriteEstimate, WriteRiskThresholds } from '../governance/risk.js';
import type { CheckedProxyPath } from '../governance/http-path.js';
import type { RateLimiter } from '../ratelimit/limiter.js';
import type { Logger } from '../observability/logger.js';
import type { Config } from '../config/index.js';

export type Channel = 'http' | 'pgwire' | 'mcp';

/** What the agent asks for, in the terms of its source type. */
export type GovernedAction =
  | {
      readonly kind: 'http';
      readonly method: string;
      /** The request target exactly as received, for path validation (never a decoded form). */
      readonly rawTarget: string;
      /** Request headers, lower-cased names; only the allowlist of spec §4 rule 6 ever goes upstream. */
      readonly headers: HttpHeaders;
      readonly body: Buffer | null;
    }
  | {
      readonly kind: 'sql';
      readonly sql: string;
      readonly params: readonly unknown[];
      /**
       * Set by a front door that keeps the statement's session and re-applies the governed session state after a
       * session reset (the wire relay, docs/pgwire.md "Session resets"); elsewhere a reset is refused.
       */
      readonly reappliesSessionState?: true;
      /**
       * Set by a front door that tracks the session's search_path (the wire relay): it may change the path, and its
       * statements are governed under `searchPath` (null: the governed default path). Elsewhere a change is refused.
       */
      readonly tracksSearchPath?: true;
      readonly searchPath?: PathResolution | null;
    };

/**
 * Request headers as node:http parsed them (lower-cased names; a repeated header joined with ", ", except the few
 * node keeps as a list): the proxy passes its parser's map as it is, and readers take `single()` of a name.
 */
export type HttpHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/** How the identity is established: a bearer credential to verify, or an identity the front door already authenticated (the wire listener at login). */
export type Credential = { readonly kind: 'bearer'; readonly authorization: string | undefined } | { readonly kind: 'authenticated'; readonly identity: AgentIdentity };

/** The resolved HTTP target (after source resolution): where the request would go, and the path the rules match. */
export interface HttpTarget {
  /** The upstream URL; placeUnderBase shares one among the requests that name it: read it, never set a part of it. */
  readonly url: PlacedUrl;
  /** The path beneath the source's base URL, starting with "/", as role and policy globs see it. */
  readonly path: string;
  readonly query: string;
  /** The path as further decoding layers would read it (docs/proxy.md "Nested percent-encoding"): role and policy must hold for each too. */
  readonly deeperPaths: readonly string[];
}

export interface ApprovalTicket {
  readonly id: number;
  readonly state: 'pending';
  readonly expires_at: string;
}

/**
 * One agent request as it passes the stages. Front doors fill the first block; each stage fills
 * its own field, so a later stage can rely on every earlier one having run.
 */
export interface GovernedRequest {
  readonly channel: Channel;
  readonly requestId: string;
  readonly clientIp: string | null;
  readonly sourceId: string;
  readonly credential: Credential;
  readonly action: GovernedAction;
  readonly audit: AuditContext;
  /**
   * Set only when an approved request executes: every check runs again (identity, grant, policy, egress),
   * but the approval stage lets it through instead of queueing it a second time.
   */
  readonly preApproved?: {
    readonly approvalId: number;
    /** The planner's row estimate the approver was shown for a SQL write, if any. */
    readonly approvedRows?: number | null;
  };

  identity?: AgentIdentity;
  /** The request path after the source-independent checks of step 1 (HTTP). */
  httpPath?: CheckedProxyPath;
  source?: RegisteredSource;
  httpTarget?: HttpTarget;
  sql?: SqlClassification & { ok: true };
  operation?: Operation;
  tables?: readonly string[];
  columns?: readonly string[];
  /** What the statement reads and what feeds each result column (the `columns` stage), when column rules apply. */
  columnAnalysis?: ColumnAnalysis;
  roleDecision?: SourceRoleDecision;
  /** The source catalog's classifications (the `catalog` stage). */
  catalog?: CatalogClassifications;
  policyDecision?: Decision;
  /** The measured effect of a row-writing statement and the source's thresholds (write_estimate stage). */
  writeEffect?: MeasuredWriteEffect;
  risk?: RiskAssessment;
  /** For a queued write: the exact row count of a rolled-back run, shown to the approver. */
  writePreview?: WritePreview;
  approval?: ApprovalTicket;
}

export interface MeasuredWriteEffect {
  readonly estimate: WriteEstimate;
  readonly thresholds: WriteRiskThresholds;
}

/** The exact effect a queued write would have had now, or why it was not counted. */
export type WritePreview = { readonly ok: true; readonly rows: number; readonly tables: readonly TableEffect[] } | { readonly ok: false; readonly reason: string };

/** What a statement's effect is measured with: the identity's upstream scope, the statement and its bound parameters. */
export interface WriteEffectRequest {
  readonly source: RegisteredSource;
  readonly identity: Pick<AgentIdentity, 'mapped_pg_role'>;
  readonly sql: string;
  readonly params: readonly unknown[];
}

/**
 * Measures a write on its source before it runs (connectors/postgres-effects.ts): the planner's estimate, and for a
 * write the approver must see, the exact count of a rolled-back run. Never throws: a failure is `ok: false`.
 */
export interface WriteEffectPort {
  estimate(r: WriteEffectRequest): Promise<MeasuredWriteEffect>;
  preview(r: WriteEffectRequest, estimate: WriteEstimate): Promise<WritePreview>;
}

/** Stores a pending approval and its original request (the approvals module implements it). */
export interface ApprovalQueue {
  enqueue(req: GovernedRequest & { identity: AgentIdentity; source: RegisteredSource; risk: RiskAssessment }): Promise<ApprovalTicket>;
}

/** Classified response fields of one HTTP operation of a source's OpenAPI document (docs/catalog.md). */
export interface ClassifiedOperation {
  readonly method: string;
  /** The OpenAPI path template as a matcher of proxy paths (`/users/{id}` matches `/users/42`). */
  readonly matches: (path: string) => boolean;
  /** Tag → JSON field names classified with it. */
  readonly byTag: ReadonlyMap<string, readonly string[]>;
}

/** The served snapshot's identities (docs/catalog.md "Before the next scan"): what the gateway compares live relations with. */
export interface CatalogIdentity {
  /** Relations the snapshot holds, by pg_class oid: the highest attnum it saw (a higher one was added since). */
  readonly relations: ReadonlyMap<number, number>;
  /** Classified columns by identity (`oid.attnum`) → tags: a column renamed since the scan keeps its classification. */
  readonly classified: ReadonlyMap<string, readonly string[]>;
}

/** What a source's catalog tells governance: confirmed classifications and the columns drift protection redacts. */
export interface CatalogClassifications {
  /** SQL: tags per governed column name (`schema.table.column`). */
  readonly columnTags: ReadonlyMap<string, readonly string[]>;
  /** SQL: governed column names per tag (what `redact_classified` redacts). */
  readonly byTag: ReadonlyMap<string, readonly string[]>;
  /** SQL: columns added by drift that stay redacted until their change is acknowledged. */
  readonly protectedColumns: readonly string[];
  /** SQL: the served snapshot's identities, when it recorded them. */
  readonly identity?: CatalogIdentity;
  /** Whether drift protection is on for the source (unseen columns are redacted only then). */
  readonly driftProtection?: boolean;
  /** HTTP: classified response fields per operation. */
  readonly operations: readonly ClassifiedOperation[];
}

/** The catalog's classifications per source (src/catalog/governance.ts implements it, cached and reloaded on change). */
export interface CatalogPort {
  /** Cached and fresh, else null (no I/O). */
  current(sourceId: string): CatalogClassifications | null;
  /** Loads when not cached; rejects when the control store cannot be read. */
  get(sourceId: string): Promise<CatalogClassifications>;
}

/** The identity's grants and roles on one source (PipelineDeps.roleContext). */
export interface RoleContext {
  grants: readonly Grant[];
  roles: readonly SourceRole[];
}

export interface PipelineDeps {
  readonly config: Readonly<Config>;
  readonly log: Logger;
  authenticate(authorization: string | undefined): Promise<AgentIdentity>;
  lookupSource(sourceId: string): RegisteredSource | undefined;
  /**
   * Grants and roles of the identity on the source; callers may cache by grant version. A cached answer comes at once,
   * not as a promise, so a statement decided from the wire's memo waits for nothing (docs/decisions/0029).
   */
  roleContext(identity: AgentIdentity, sourceId: string): RoleContext | Promise<RoleContext>;
  policies(): CompiledPolicySet;
  readonly rateLimiter: RateLimiter;
  readonly sql: SqlClassifier;
  /** Source structures for column resolution (cached per source, dropped on DDL). */
  readonly structures: StructureProvider<RegisteredSource>;
  readonly pii: PiiScanner;
  readonly approvals: ApprovalQueue;
  /**
   * What a SQL source's own catalog says of the allowlisted calls (connectors/postgres-calls.ts), cached per source.
   * Absent (the policy dry-run, tests of the pure stages), the built-in allowlist alone decides.
   */
  callTrust?(source: RegisteredSource): CallTrust | Promise<CallTrust>;
  /** Called after a statement that may change the source's functions, operators or types was allowed. */
  callCatalogChanged?(sourceId: string): void;
  /** Measures SQL writes before they run; absent, every row-writing statement is unmeasured and queues (fail closed). */
  readonly writeEffects?: WriteEffectPort;
  /** The source catalog's classifications and drift protection; absent, no catalog facts reach policy. */
  readonly catalog?: CatalogPort;
}

/** How a stage ends a request early, short of an error (errors are thrown as GatehouseError). */
export type StageOutcome = { readonly kind: 'queued'; readonly approval: ApprovalTicket };

/** A stage: resolves to nothing to let the next stage run, or to an outcome that ends the request. */
export type Stage<R extends GovernedRequest = GovernedRequest, D = PipelineDeps, O = StageOutcome> = {
  readonly name: string;
  run(req: R, deps: D): Promise<O | void> | O | void;
};

export const isWriteOperation = (op: Operation | undefined): boolean => op !== undefined && op !== 'read';
