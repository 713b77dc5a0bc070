// The naming report (pure): how the table and column names of source-role rules and deny/redact policies resolve in each source's catalog — ambiguous unqualified names, case or quoting mismatches, globs that match nothing, globs that newly match what the last scan added, names that stopped resolving (docs/catalog.md "Naming report").
import { compileColumnGlobs, compileGlobs, GLOB_SEP, type Matcher } from '../governance/policy/glob.js';
import type { CatalogStructure } from './model.js';
import { parsePath, pathOf } from './model.js';
import { joinName } from '../governance/sql/names.js';

export type FindingKind = 'ambiguous_unqualified' | 'case_mismatch' | 'matches_nothing' | 'newly_matches' | 'stopped_resolving';

/** Who names the object: a rule of a source role, or a policy. */
export type NameOwner =
  | { readonly kind: 'source_role'; readonly role_id: number; readonly role_key: string; readonly rule_index: number }
  | { readonly kind: 'policy'; readonly policy_id: number; readonly policy_name: string };

export interface NamedPattern {
  readonly owner: NameOwner;
  /** Where the name sits: a role rule's or a policy condition's `tables`, a policy's `columns` or `redact_columns`. */
  readonly field: 'tables' | 'columns' | 'redact_columns';
  readonly name: string;
  /** The source ids it applies to (a role: its own source; a policy: every source its source_ids match). */
  readonly sources: readonly string[];
}

export interface SourceCatalog {
  readonly source_id: string;
  readonly structure: CatalogStructure;
  /** Paths the latest scan reported added and removed (quoted paths, as changes carry them). */
  readonly added: readonly string[];
  readonly removed: readonly string[];
}

export interface NamingFinding {
  readonly source_id: string;
  readonly owner: NameOwner;
  readonly field: NamedPattern['field'];
  readonly name: string;
  readonly kind: FindingKind;
  /** The objects in question (quoted paths): what the name resolves to, would resolve to, or no longer resolves to. */
  readonly resolved: readonly string[];
  readonly detail: string;
}

/** Most objects listed per finding; `detail` says how many there were. */
const MAX_RESOLVED = 50;

interface Obj {
  readonly governed: string;
  readonly path: string;
  readonly schema: string;
  /** The relation name (tables) or column name (columns): what an unqualified name is compared with. */
  readonly bare: string;
}

interface Index {
  readonly tables: readonly Obj[];
  readonly columns: readonly Obj[];
}

function indexOf(s: CatalogStructure): Index {
  const tables: Obj[] = [];
  const columns: Obj[] = [];
  for (const r of s.relations) {
    tables.push({ governed: joinName(r.schema, r.name), path: pathOf(r.schema, r.name), schema: r.schema, bare: r.name });
    for (const c of r.columns) columns.push({ governed: joinName(r.schema, r.name, c.name), path: pathOf(r.schema, r.name, c.name), schema: r.schema, bare: c.name });
  }
  return { tables, columns };
}

function governedOfPath(path: string, field: NamedPattern['field']): string | null {
  const segs = parsePath(path);
  // A table name is compared with relations only, a column name with columns only.
  if (segs === null || segs.length !== (field === 'tables' ? 2 : 3)) return null;
  return joinName(...segs);
}

function matcherFor(field: NamedPattern['field'], pattern: string): Matcher {
  return field === 'tables' ? compileGlobs([pattern], GLOB_SEP.table) : compileColumnGlobs([pattern]);
}

/** The name compared without regard to case (names in rules are case-sensitive, as quoted identifiers are). */
function foldedMatcher(field: NamedPattern['field'], pattern: string): Matcher {
  const m = matcherFor(field, pattern.toLowerCase());
  return (v) => m(v.toLowerCase());
}

/** The name compared with every quote dropped, as one string: finds `my.schema.orders` written for `"my.schema".orders`. */
function unquotedMatcher(pattern: string): Matcher {
  const m = compileGlobs([pattern.replaceAll('"', '').toLowerCase()], '');
  return (v) => m(v.replaceAll('"', '').toLowerCase());
}

const list = (objs: readonly Obj[]) => objs.slice(0, MAX_RESOLVED).map((o) => o.path);
const more = (n: number) => (n > MAX_RESOLVED ? ` (${n} in all; the first ${MAX_RESOLVED} listed)` : '');

function findingsFor(p: NamedPattern, cat: SourceCatalog, idx: Index, out: NamingFinding[]): void {
  const objs = p.field === 'tables' ? idx.tables : idx.columns;
  const emit = (kind: FindingKind, resolved: readonly string[], detail: string) => out.push({ source_id: cat.source_id, owner: p.owner, field: p.field, name: p.name, kind, resolved, detail });
  const exact = matcherFor(p.field, p.name);
  const hits = objs.filter((o) => exact(o.governed));
  const unqualified = !p.name.includes('.');

  // Unqualified: a table name is compared with schema-qualified names, a bare column name with every column of every schema.
  if (unqualified) {
    const bare = compileGlobs([p.name], '');
    const candidates = p.field === 'tables' ? objs.filter((o) => bare(o.bare)) : hits;
    const schemas = new Set(candidates.map((o) => o.schema));
    if (schemas.size > 1) {
      emit('ambiguous_unqualified', list(candidates), `resolves in ${schemas.size} schemas (${[...schemas].sort().slice(0, 10).join(', ')})${more(candidates.length)}; qualify it with its schema`);
    }
    if (p.field === 'tables' && candidates.length > 0 && hits.length === 0) {
      if (schemas.size === 1) emit('matches_nothing', list(candidates), `table names are matched schema-qualified: this names ${candidates[0]!.path} only when written ${pathOf(candidates[0]!.schema)}.${p.name}`);
      return;
    }
  }

  const folded = foldedMatcher(p.field, p.name);
  const unquoted = unquotedMatcher(p.name);
  const hitSet = new Set(hits.map((o) => o.governed));
  const missedByCase = objs.filter((o) => !hitSet.has(o.governed) && folded(o.governed));
  const caseSet = new Set(missedByCase.map((o) => o.governed));
  const missedByQuoting = objs.filter((o) => !hitSet.has(o.governed) && !caseSet.has(o.governed) && unquoted(o.governed));
  if (missedByQuoting.length > 0) {
    emit('case_mismatch', list(missedByQuoting), `a name part holding a dot must be quoted in a rule (${missedByQuoting[0]!.governed}); as written, its dots separate parts${more(missedByQuoting.length)}`);
  }
  if (missedByCase.length > 0) {
    emit(
      'case_mismatch',
      list(missedByCase),
      hits.length === 0
          ? `matches nothing as written, but ${missedByCase.length} object(s) differing only in case${more(missedByCase.length)}: names are case-sensitive`
          : `also exists in another case, which this name does not cover${more(missedByCase.length)}`,
    );
  }

  if (hits.length === 0) {
    const removed = cat.removed.map((r) => ({ path: r, governed: governedOfPath(r, p.field) })).filter((r) => r.governed !== null && exact(r.governed));
    if (removed.length > 0) emit('stopped_resolving', removed.slice(0, MAX_RESOLVED).map((r) => r.path), `matched what the last scan found removed; it matches nothing now${more(removed.length)}`);
    else if (missedByCase.length === 0 && missedByQuoting.length === 0) emit('matches_nothing', [], p.owner.kind === 'policy' ? 'matches no object of the catalog: this rule protects nothing here' : 'matches no object of the catalog');
    return;
  }

  const added = new Set(cat.added.map((a) => governedOfPath(a, p.field)).filter((g): g is string => g !== null));
  const fresh = hits.filter((o) => added.has(o.governed));
  if (fresh.length > 0) emit('newly_matches', list(fresh), `now also matches what the last scan added${more(fresh.length)}: the rule's meaning changed`);
}

/** One entry per finding, in a stable order (source, owner, field, name, kind). */
export function namingFindings(patterns: readonly NamedPattern[], catalogs: readonly SourceCatalog[]): NamingFinding[] {
  const out: NamingFinding[] = [];
  const bySource = new Map(catalogs.filter((c) => c.structure.kind === 'sql').map((c) => [c.source_id, { cat: c, idx: indexOf(c.structure) }]));
  for (const p of patterns) {
    for (const sourceId of p.sources) {
      const entry = bySource.get(sourceId);
      if (entry !== undefined) findingsFor(p, entry.cat, entry.idx, out);
    }
  }
  const ownerKey = (o: NameOwner) => (o.kind === 'policy' ? `p${String(o.policy_id).padStart(10, '0')}` : `r${String(o.role_id).padStart(10, '0')}.${String(o.rule_index).padStart(4, '0')}`);
  return out.sort((a, b) => a.source_id.localeCompare(b.source_id) || ownerKey(a.owner).localeCompare(ownerKey(b.owner)) || a.field.localeCompare(b.field) || a.name.localeCompare(b.name) || a.kind.localeCompare(b.kind));
}
