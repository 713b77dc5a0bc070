// Guarded access to libpg-query (the real PostgreSQL parser, WASM): one-time load, and bounds that keep its recursion off the edge.
import { fingerprintSync, loadModule, parseSync, scanSync } from 'libpg-query';
import type { ParseResult } from 'libpg-query';

/** Thrown when a classifier is used before initSqlParser() resolved: a caller bug, not a verdict on the SQL. */
export class SqlParserNotReadyError extends Error {
  readonly code = 'sql_parser_not_ready';
  constructor() {
    super('the SQL parser is not loaded: await initSqlParser() before classifying');
    this.name = 'SqlParserNotReadyError';
  }
}

let ready = false;
let loading: Promise<void> | null = null;

/** Loads the parser's WASM module once; later calls return the same promise. */
export function initSqlParser(): Promise<void> {
  loading ??= loadModule().then(() => {
    ready = true;
  });
  return loading;
}

export function sqlParserReady(): boolean {
  return ready;
}

/**
 * Why the nesting guard exists (measured on libpg-query 18.1.5, docs/governance/sql.md "Bounds"):
 * a deep tree makes the WASM code overflow the JS stack (RangeError) — from ~2,500 nested
 * sub-selects or ~9,600 chained operators in parse, ~700 chained operators in normalize — and each
 * overflow leaks the WASM stack: a few hundred of them corrupt the module for every later caller.
 * So no input may reach parseSync unless its nesting is known to be far below those depths.
 *
 * Every tree level needs at least two characters (an operand and an operator, or `f(`), so a text
 * of SHORT_TEXT characters cannot nest deeper than ~1,000 levels: it is parsed without a scan.
 * Longer texts are scanned first with the parser's own lexer (flat, no recursion), and
 * nestingEstimate() must stay under MAX_NESTING_ESTIMATE.
 */
export const SHORT_TEXT = 2048;
export const MAX_NESTING_ESTIMATE = 1000;

/**
 * An upper bound on tree depth from tokens alone: every token adds one level to the current
 * parenthesis level, `(`/`[` open a level, and the list and boolean separators (`,` `;` AND OR)
 * reset a level, because their operands are siblings (the parser flattens AND/OR chains).
 * String literals are single tokens, so their contents cannot cheat the count.
 */
export function nestingEstimate(sql: string): number {
  const tokens = scanTokens(sql);
  const saved: number[] = [];
  let below = 0;
  let cur = 0;
  let max = 0;
  for (const t of tokens) {
    const text = t.text;
    if (text === '(' || text === '[') {
      saved.push(cur);
      below += cur + 1;
      cur = 0;
    } else if (text === ')' || text === ']') {
      const outer = saved.pop();
      if (outer !== undefined) {
        below -= outer + 1;
        cur = outer + 1;
      }
    } else if (text === ',' || text === ';') {
      cur = 0;
    } else {
      const lower = text.length <= 3 ? text.toLowerCase() : '';
      cur = lower === 'and' || lower === 'or' ? 0 : cur + 1;
    }
    if (below + cur > max) max = below + cur;
  }
  return max;
}

/**
 * libpg-query's scanner writes its JSON without escaping control characters other than tab, newline and carriage
 * return, so a valid statement with, say, U+0001 in a string literal, quoted identifier or comment made JSON.parse throw
 * ("Bad control character in string literal in JSON") and the statement was refused as unparseable. Such characters
 * can only stand inside those tokens (anywhere else they are a syntax error, which parseSync still reports on the real
 * text): the scan sees a space in their place, one byte for one, so token boundaries (byte offsets) are unchanged.
 */
/** Everything below a space but tab, newline and carriage return (the ones the scanner escapes). */
const JSON_UNSAFE_CONTROLS = /[^\t\n\r -\uffff]/g;
function scanTokens(sql: string): ReturnType<typeof scanSync>['tokens'] {
  return scanSync(sql.replace(JSON_UNSAFE_CONTROLS, ' ')).tokens;
}

export type ParseOutcome =
  | { readonly ok: true; readonly tree: ParseResult }
  | { readonly ok: false; readonly message: string };

function describe(err: unknown): string {
  if (err instanceof RangeError) return 'statement is too deeply nested to parse';
  if (err instanceof Error) {
    const pos = (err as { sqlDetails?: { cursorPosition?: number } }).sqlDetails?.cursorPosition;
    return typeof pos === 'number' && pos >= 0 ? `${err.message} (at character ${pos + 1})` : err.message;
  }
  return 'the parser failed';
}

/** Parses a text already checked for length, NUL and emptiness. Never throws for bad SQL. */
export function guardedParse(sql: string): ParseOutcome {
  if (!ready) throw new SqlParserNotReadyError();
  try {
    if (sql.length > SHORT_TEXT) {
      const estimate = nestingEstimate(sql);
      if (estimate > MAX_NESTING_ESTIMATE) {
        return { ok: false, message: `statement is too deeply nested (nesting estimate ${estimate} > ${MAX_NESTING_ESTIMATE})` };
      }
    }
    return { ok: true, tree: parseSync(sql) };
  } catch (err) {
    return { ok: false, message: describe(err) };
  }
}

/** Lexer token names of literals (string, bit, hex, Unicode-escaped, integer, float constants) and of comments. */
const LITERAL_TOKENS: ReadonlySet<string> = new Set(['SCONST', 'USCONST', 'BCONST', 'XCONST', 'ICONST', 'FCONST']);
const COMMENT_TOKENS: ReadonlySet<string> = new Set(['SQL_COMMENT', 'C_COMMENT']);
/** Token numbers of PostgreSQL 18's gram.h for the literal kinds libpg-query's scanner reports as UNKNOWN (USCONST, BCONST, XCONST). */
const LITERAL_TOKEN_TYPES: ReadonlySet<number> = new Set([260, 261, 262, 263, 264, 266]);

/**
 * The text with every literal replaced by `$n` (numbered after the highest parameter the text already has) and every
 * comment dropped, in every statement kind. libpg-query's normalize keeps the literals of PREPARE, EXECUTE, COPY
 * options, CREATE TABLE AS, views and defaults; the lexer sees them all, so approval summaries and audit entries
 * built from this text carry no value the agent sent.
 */
export function scrubLiterals(sql: string): string {
  const tokens = scanTokens(sql);
  const bytes = Buffer.from(sql, 'utf8');
  let next = 0;
  for (const t of tokens) {
    if (t.tokenName === 'PARAM') next = Math.max(next, Number.parseInt(t.text.slice(1), 10) || 0);
  }
  const out: string[] = [];
  let at = 0;
  for (const t of tokens) {
    const literal = LITERAL_TOKENS.has(t.tokenName) || LITERAL_TOKEN_TYPES.has(t.tokenType);
    const comment = COMMENT_TOKENS.has(t.tokenName);
    if (!literal && !comment) continue;
    out.push(bytes.toString('utf8', at, t.start));
    if (literal) {
      next += 1;
      out.push(`$${next}`);
    } else {
      out.push(' ');
    }
    at = t.end;
  }
  out.push(bytes.toString('utf8', at));
  return out.join('').trim();
}

/** Fingerprint and literal-free text; only called on trees whose depth the walker has bounded. */
export function fingerprintAndNormalize(sql: string): { ok: true; fingerprint: string; normalized: string } | { ok: false; message: string } {
  try {
    return { ok: true, fingerprint: fingerprintSync(sql), normalized: scrubLiterals(sql) };
  } catch (err) {
    return { ok: false, message: describe(err) };
  }
}
