// A COPY … TO STDOUT on the wire: which statements are one, how the gateway learns the columns it moves (before it runs), and the stream of one run through the redactor with its bounds.
import { joinName } from '../../governance/sql/names.js';
import { scanSync } from 'libpg-query';
import { quoteIdent, quoteLiteral } from '../../connectors/postgres-exec.js';
import { guardedParse } from '../../governance/sql/parser.js';
import type { PiiMode, PiiScanner } from '../../governance/pii/index.js';
import { typedRowRedactor, type JsonRedactor } from '../../governance/pii/by-type.js';
import type { ResultField } from '../../governance/sql/result-columns.js';
import { copyFormatOf, type CopyFormat, type CopyOption } from './copy-format.js';
import { CopyOutError, CopyOutRedactor } from './copy-out.js';
import { Frontend, message, parseMessage, queryMessage, syncMessage, type ErrorFields } from './protocol.js';

/** Types whose binary form is their UTF-8 text (as for DataRows in binary format), so personal-data scanning applies in binary COPY too. */
export const TEXT_LIKE_OIDS: ReadonlySet<number> = new Set([25, 1043, 1042, 19, 114]);

/** The statement name of the gateway's own Parse that describes a COPY's query; closed again in the same round trip. */
const DESCRIBE_STATEMENT = 'gatehouse_copy_describe';

export interface CopyOutStatement {
  /** `COPY t [(cols)]`: the relation as written. */
  readonly relation: { readonly schema: string | null; readonly name: string } | null;
  readonly attlist: readonly string[];
  /** `COPY (query)`: the query's text. */
  readonly query: string | null;
  readonly format: CopyFormat;
}

export type CopyOutTarget = { kind: 'none' } | { kind: 'copy'; statement: CopyOutStatement } | { kind: 'refuse'; error: ErrorFields };

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (isObj(v) && isObj(v.String) && typeof v.String.sval === 'string' ? v.String.sval : null);

/** Whether one statement's text is a COPY … TO STDOUT, and if so what it moves and in which format. */
export function copyOutTarget(sql: string): CopyOutTarget {
  const parsed = guardedParse(sql);
  if (!parsed.ok) return { kind: 'none' };
  const stmts = (parsed.tree as { stmts?: { stmt?: Json }[] }).stmts ?? [];
  const copy = stmts.length === 1 ? stmts[0]!.stmt?.CopyStmt : undefined;
  // FROM, a server file and PROGRAM are governed as statements (a write, admin): no stream leaves through here.
  if (!isObj(copy) || copy.is_from === true || copy.is_program === true || typeof copy.filename === 'string') return { kind: 'none' };
  const options: CopyOption[] = (Array.isArray(copy.options) ? copy.options : []).flatMap((o: unknown) =>
    isObj(o) && isObj(o.DefElem) && typeof o.DefElem.defname === 'string' ? [{ name: o.DefElem.defname, arg: o.DefElem.arg }] : [],
  );
  const format = copyFormatOf(options);
  if (!format.ok) return { kind: 'refuse', error: { sqlstate: '0A000', message: format.message } };
  if (isObj(copy.relation)) {
    const rv = copy.relation;
    const attlist = (Array.isArray(copy.attlist) ? copy.attlist : []).map(str).filter((s): s is string => s !== null);
    const relation = { schema: typeof rv.schemaname === 'string' && rv.schemaname !== '' ? rv.schemaname : null, name: String(rv.relname ?? '') };
    return { kind: 'copy', statement: { relation, attlist, query: null, format: format.format } };
  }
  const query = parenthesized(sql);
  if (query === null) return { kind: 'refuse', error: { sqlstate: '0A000', message: 'the COPY statement could not be read' } };
  return { kind: 'copy', statement: { relation: null, attlist: [], query, format: format.format } };
}

/** The text inside `COPY ( … )`: from the parser's own tokens, so parentheses in strings and comments do not count. */
function parenthesized(sql: string): string | null {
  const tokens = scanSync(sql).tokens;
  if (tokens[1]?.text !== '(') return null;
  let depth = 0;
  for (let i = 1; i < tokens.length; i++) {
    const t = tokens[i]!.text;
    if (t === '(') depth++;
    else if (t === ')' && --depth === 0) {
      // Token offsets are byte offsets into the UTF-8 text.
      return Buffer.from(sql, 'utf8').toString('utf8', tokens[1]!.end, tokens[i]!.start);
    }
  }
  return null;
}

/**
 * What the gateway sends on the session's connection to learn the columns, before the COPY runs and in the same
 * session (search path, temporary tables, transaction). `COPY t`: the columns COPY writes, read from the catalog
 * (ordinary, not dropped, not generated; the relation resolved as COPY resolves it). `COPY (query)`: a Parse and
 * Describe of the query under a name of the gateway's own, closed at once: nothing is executed.
 */
export function describeMessages(s: CopyOutStatement): Buffer {
  if (s.relation) {
    const rel = s.relation.schema === null ? quoteIdent(s.relation.name) : `${quoteIdent(s.relation.schema)}.${quoteIdent(s.relation.name)}`;
    return queryMessage(
      `SELECT a.attname, a.atttypid::pg_catalog.int4, n.nspname, c.relname, c.oid::pg_catalog.int8, a.attnum FROM pg_catalog.pg_attribute a ` +
        `JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace ` +
        `WHERE a.attrelid = ${quoteLiteral(rel)}::pg_catalog.regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum`,
    );
  }
  const name = Buffer.from(`${DESCRIBE_STATEMENT}\0`);
  return Buffer.concat([
    parseMessage(DESCRIBE_STATEMENT, s.query!),
    message(Frontend.Describe, Buffer.concat([Buffer.from('S'), name])),
    message(Frontend.Close, Buffer.concat([Buffer.from('S'), name])),
    syncMessage(),
  ]);
}

export interface CopyColumns {
  /** Names and origins as a RowDescription gives them, for redaction by provenance (pipeline/columns.ts). */
  readonly fields: readonly ResultField[];
  readonly names: readonly string[];
  readonly typeOids: readonly number[];
  /** `schema.table.column` of each column of `COPY t`, for the column rules; null for `COPY (query)` (its own analysis governs it). */
  readonly tableColumns: readonly string[] | null;
}

/** The columns from the catalog rows of `COPY t` (narrowed to its column list, in that order). */
export function relationColumns(s: CopyOutStatement, rows: readonly (readonly (string | null)[])[]): CopyColumns {
  const all = rows.map((r) => ({ name: r[0] ?? '', type: Number(r[1]), qualified: joinName(r[2] ?? '', r[3] ?? '', r[0] ?? ''), tableOid: Number(r[4]), attnum: Number(r[5]) }));
  const chosen = s.attlist.length === 0 ? all : s.attlist.map((n) => all.find((c) => c.name === n)).filter((c) => c !== undefined);
  return {
    fields: chosen.map((c) => ({ name: c.name, tableOid: c.tableOid, attnum: c.attnum })),
    names: chosen.map((c) => c.name),
    typeOids: chosen.map((c) => c.type),
    tableColumns: chosen.map((c) => c.qualified),
  };
}

export interface CopyStreamOptions {
  readonly format: CopyFormat;
  readonly columns: CopyColumns;
  readonly pii: PiiScanner;
  /** null: nothing to redact (pii mode off and no redacted column); the stream is relayed as it is, rows counted by CopyData. */
  readonly redaction: { readonly mode: PiiMode; readonly redactColumns: readonly string[]; readonly forceColumns: readonly boolean[]; readonly redactJson: JsonRedactor } | null;
  readonly maxRowBytes: number;
  readonly maxRows: number;
}

/** The column a binary COPY would have to hide but cannot (its values are replaced whatever they are), or null. */
export function binaryRefusal(o: CopyStreamOptions): string | null {
  if (o.format.kind !== 'binary' || o.redaction === null) return null;
  const names = o.columns.names;
  const redact = o.pii.rowRedactor(names, o.redaction);
  // A probe row without personal data shows which columns are replaced whatever their value (as the DataRow plan does).
  const probe = names.map(() => '\u0001');
  const replaced = redact(probe).values.findIndex((v, i) => v !== probe[i]);
  return replaced < 0 ? null : names[replaced]!;
}

export type CopyStep = { ok: true; out: Buffer | null } | { ok: false; error: ErrorFields; reason: string; code: 'payload_too_large' | 'copy_stream_refused' };

/** One COPY TO run's stream: CopyOutResponse checked against the columns, then each CopyData redacted and bounded. */
export class CopyOutStream {
  readonly #o: CopyStreamOptions;
  #redactor: CopyOutRedactor | null = null;
  rows = 0;

  constructor(options: CopyStreamOptions) {
    this.#o = options;
  }

  get redactions(): number {
    return this.#redactor?.redactions ?? 0;
  }

  /** CopyOutResponse: int8 overall format, int16 column count, one int16 format per column. */
  start(body: Buffer): CopyStep {
    const columns = body.readInt16BE(1);
    if (columns !== this.#o.columns.names.length || (body[0] === 1) !== (this.#o.format.kind === 'binary')) {
      return this.#refuse(`the COPY stream does not match the statement's ${this.#o.columns.names.length} columns`, 'copy stream does not match its description');
    }
    if (this.#o.redaction !== null) {
      const binary = this.#o.format.kind === 'binary';
      this.#redactor = new CopyOutRedactor({
        format: this.#o.format,
        columns,
        textColumns: this.#o.columns.typeOids.map((t) => !binary || TEXT_LIKE_OIDS.has(t)),
        // Redacted values written as their column's type allows, as in a DataRow (governance/pii/by-type.ts).
        redact: typedRowRedactor(this.#o.columns.typeOids, this.#o.pii.rowRedactor(this.#o.columns.names, this.#o.redaction), this.#o.redaction.redactJson),
        maxRowBytes: this.#o.maxRowBytes,
      });
    }
    return { ok: true, out: null };
  }

  data(body: Buffer): CopyStep {
    let out: Buffer = body;
    if (this.#redactor) {
      try {
        out = this.#redactor.push(body);
      } catch (err) {
        return this.#failed(err);
      }
      this.rows = this.#redactor.rows;
    } else this.rows++;
    if (this.rows > this.#o.maxRows) {
      return { ok: false, error: { sqlstate: '54000', message: `the result exceeds the gateway's row limit (${this.#o.maxRows} rows)` }, reason: `result rows above gateway.limits.result_rows (${this.#o.maxRows})`, code: 'payload_too_large' };
    }
    return { ok: true, out: out.length > 0 ? out : null };
  }

  done(): CopyStep {
    try {
      this.#redactor?.end();
    } catch (err) {
      return this.#failed(err);
    }
    return { ok: true, out: null };
  }

  #failed(err: unknown): CopyStep {
    if (!(err instanceof CopyOutError)) throw err;
    if (err.reason === 'row_too_long') return { ok: false, error: { sqlstate: '54000', message: err.message }, reason: `copy: ${err.message}`, code: 'payload_too_large' };
    return this.#refuse(err.message, `copy: ${err.message}`);
  }

  #refuse(message: string, reason: string): CopyStep {
    return { ok: false, error: { sqlstate: 'XX000', message }, reason, code: 'copy_stream_refused' };
  }
}
