// Glob patterns shared by policies and source roles: compiled once into matchers so the request path does no parsing.
import { NAME_SEP, namePart, nameSegments, splitName } from '../sql/names.js';

/**
 * Glob dialect (docs/governance/policies.md "Globs"):
 * - `**` matches any run of characters, separators included (any depth, also empty);
 * - `*` matches any run of characters except the separator (one segment, or part of one);
 * - every other character is literal, case-sensitive. There are no `?`, classes or braces,
 *   so a pattern an operator writes can never be a surprising regular expression.
 * A path pattern `/a/**` also matches `/a` itself: a trailing `/**` means "this node and everything below".
 */
export type Matcher = (value: string) => boolean;

const matchAll: Matcher = () => true;
const matchNone: Matcher = () => false;

export function hasWildcard(pattern: string): boolean {
  return pattern.includes('*');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.+?^${}()|[\]\\/-]/g, '\\$&');
}

/** The regular-expression body of one pattern (no anchors). `sep` is '' when values have no segments. */
export function globToRegExpSource(pattern: string, sep: string): string {
  const one = sep === '' ? '.*' : `[^${escapeRegExp(sep)}]*`;
  let out = '';
  let i = 0;
  while (i < pattern.length) {
    if (pattern.startsWith('**', i)) {
      // `<sep>**` at the end also matches the bare parent (`/a/**` matches `/a`).
      if (sep !== '' && i + 2 === pattern.length && out.endsWith(escapeRegExp(sep))) {
        out = `${out.slice(0, -escapeRegExp(sep).length)}(?:${escapeRegExp(sep)}.*)?`;
      } else {
        out += '.*';
      }
      i += 2;
      while (pattern[i] === '*') i += 1;
    } else if (pattern[i] === '*') {
      out += one;
      i += 1;
    } else {
      out += escapeRegExp(pattern[i] as string);
      i += 1;
    }
  }
  return out;
}

/**
 * One matcher for a list of patterns (any-of): exact names by Set lookup, wildcards in one RegExp. Qualified SQL names
 * (sep `.`) are matched part by part (sql/names.ts): a quoted part may hold dots (`"my.schema"."my.table"` is two
 * parts, matched by `*.*`), and a pattern may quote one too (`"my.schema".*`).
 */
export function compileGlobs(patterns: readonly string[], sep: string): Matcher {
  if (sep === '.') {
    const m = compileSegmentGlobs(patterns.map(nameSegments));
    return (v) => m(nameSegments(v));
  }
  return compileSegmentGlobs(patterns, sep);
}

function compileSegmentGlobs(patterns: readonly string[], sep: string = NAME_SEP): Matcher {
  if (patterns.length === 0) return matchNone;
  const exact = new Set<string>();
  const wild: string[] = [];
  for (const p of patterns) {
    if (p === '**' || (sep === '' && /^\*+$/.test(p))) return matchAll;
    if (hasWildcard(p)) wild.push(globToRegExpSource(p, sep));
    else exact.add(p);
  }
  if (wild.length === 0) {
    if (exact.size === 1) {
      const only = exact.values().next().value as string;
      return (v) => v === only;
    }
    return (v) => exact.has(v);
  }
  const re = new RegExp(`^(?:${wild.join('|')})$`, 's');
  if (exact.size === 0) return (v) => re.test(v);
  return (v) => exact.has(v) || re.test(v);
}

export function compileGlob(pattern: string, sep: string): Matcher {
  return compileGlobs([pattern], sep);
}

/** Separators per kind of name, so every caller uses the same dialect. */
export const GLOB_SEP = {
  source: '',
  path: '/',
  table: '.',
  column: '.',
} as const;

/**
 * Column patterns: a pattern without a dot names a bare column and is compared with the last
 * segment of the value (`email` matches `public.users.email`); a dotted pattern is compared
 * with the value as given (`public.users.email`, `*.*.ssn`).
 */
export function compileColumnGlobs(patterns: readonly string[]): Matcher {
  const bare = patterns.filter((p) => splitName(p).length === 1);
  const dotted = patterns.filter((p) => splitName(p).length > 1);
  const bareM = bare.length > 0 ? compileGlobs(bare, GLOB_SEP.column) : matchNone;
  const dottedM = dotted.length > 0 ? compileGlobs(dotted, GLOB_SEP.column) : matchNone;
  if (dotted.length === 0) return (v) => bareM(lastSegment(v));
  if (bare.length === 0) return dottedM;
  return (v) => bareM(lastSegment(v)) || dottedM(v);
}

function lastSegment(v: string): string {
  return namePart(splitName(v).at(-1)!);
}
