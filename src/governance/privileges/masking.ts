// Masked reads at the source (docs/least-privilege.md "Masked reads"): per managed role, views that return the redacted form of the columns its policies redact, in a schema named after the role. Pure: no I/O.
//
// API: `maskExpression(column, type, tags)` is the SQL a view selects for one redacted column; `maskedView(...)`
// builds the view of one table for one role (its CREATE statement and the comment that identifies it in drift checks).
import { quoteIdent } from './quote.js';

/** The text a redacted text value becomes, as the gateway writes it (governance/pii/text.ts `[REDACTED:column]`). */
export const MASK_MARKER = '[REDACTED:column]';

/** Types whose values are free text: the fixed marker or a format-preserving mask is a value of them (as text). */
const TEXT_TYPE = /^(text|name|citext|character varying(\(\d+\))?|character(\(\d+\))?)$/;
const JSON_TYPE = /^(json|jsonb)$/;

/** Classifications whose values keep their shape: the last 4 characters of a long value (card, phone, account numbers). */
const LAST_FOUR: ReadonlySet<string> = new Set(['card', 'phone', 'iban', 'bank_account', 'ssn', 'national_id', 'tax_id', 'passport']);

/**
 * The expression a masking view selects for a redacted column, by its type and its catalog classifications:
 * - text types classified `email`: the local part becomes `***`, the domain stays (`***@example.com`);
 * - text types classified card/phone/iban/bank_account/ssn/national_id/tax_id/passport: every character but the last
 *   four becomes `*` when the value is longer than 8 characters, every character otherwise (a short value is not
 *   half shown);
 * - other text types: the fixed marker `[REDACTED:column]` the gateway itself writes;
 * - json/jsonb: the marker as a JSON string (the value stays JSON);
 * - every other type: NULL of that type (no mask is a valid value of every type — the gateway does the same).
 * NULL stays NULL. Every function is schema-qualified: the view's search_path is not the session's.
 */
export function maskExpression(column: string, type: string, tags: readonly string[]): string {
  const c = quoteIdent(column);
  if (TEXT_TYPE.test(type)) {
    const v = `${c}::pg_catalog.text`;
    if (tags.includes('email')) return `pg_catalog.regexp_replace(${v}, '^[^@]*', '***')`;
    if (tags.some((t) => LAST_FOUR.has(t))) {
      return `CASE WHEN pg_catalog.length(${v}) > 8 THEN pg_catalog.repeat('*', pg_catalog.length(${v}) - 4) || pg_catalog.right(${v}, 4) ELSE pg_catalog.repeat('*', pg_catalog.length(${v})) END`;
    }
    return `CASE WHEN ${c} IS NULL THEN NULL ELSE '${MASK_MARKER}'::pg_catalog.text END`;
  }
  if (JSON_TYPE.test(type)) return `CASE WHEN ${c} IS NULL THEN NULL ELSE pg_catalog.to_json('${MASK_MARKER}'::pg_catalog.text)::pg_catalog.${type} END`;
  return `NULL::${type}`;
}

/** One column of a masking view: selected as is, or through its mask. */
export interface MaskedColumn {
  readonly name: string;
  /** null: the value as stored. */
  readonly mask: string | null;
}

/** What a role reads of one table through its masking view (role-independent, so identities can share a role's set). */
export interface MaskSpec {
  readonly schema: string;
  readonly name: string;
  /** The columns the role may read, in table order. */
  readonly columns: readonly MaskedColumn[];
}

/** A masking view as it must exist in the database: in the schema named after its role, under its table's name. */
export interface MaskedView {
  readonly role: string;
  /** The view's schema: the role's name, so PostgreSQL's default search_path (`"$user", public`) finds it first. */
  readonly schema: string;
  readonly name: string;
  readonly create: string;
  /** The view's comment: the gateway's mark and its definition, compared with the database's to find drift. */
  readonly comment: string;
}

export const VIEW_COMMENT_MARK = 'gatehouse masked view: ';

/**
 * SQL for a view's fingerprint as PostgreSQL holds it (its normalized definition and options): written into the
 * view's comment when the gateway creates it, and compared when it reads the view back, so a view replaced or
 * altered by hand is drift even when its comment was left alone. `oid` is an SQL expression of the view's oid.
 */
export function viewFingerprintSql(oid: string): string {
  return `(select pg_catalog.md5(pg_catalog.pg_get_viewdef(v.oid) || coalesce(pg_catalog.array_to_string(v.reloptions, ','), '')) from pg_catalog.pg_class v where v.oid = ${oid})`;
}

/** The statement that marks a view just created: its comment, then a newline and its fingerprint (viewFingerprintSql). */
export function markViewSql(view: MaskedView): string {
  const target = `${quoteIdent(view.schema)}.${quoteIdent(view.name)}`;
  const literal = (t: string): string => `'${t.replace(/'/g, "''")}'`;
  const oid = `${literal(target)}::pg_catalog.regclass`;
  return `DO $gh_mask$ BEGIN EXECUTE pg_catalog.format('COMMENT ON VIEW %s IS %L', ${oid}, ${literal(view.comment)} || E'\n' || ${viewFingerprintSql(oid)}); END $gh_mask$`;
}

export function maskedView(role: string, spec: MaskSpec): MaskedView {
  const select = spec.columns.map((col) => (col.mask === null ? quoteIdent(col.name) : `${col.mask} AS ${quoteIdent(col.name)}`)).join(', ');
  // security_barrier: a role's own functions in a WHERE clause cannot see rows (or values) before the view's masks apply.
  const body = `SELECT ${select} FROM ${quoteIdent(spec.schema)}.${quoteIdent(spec.name)}`;
  return {
    role,
    schema: role,
    name: spec.name,
    create: `CREATE VIEW ${quoteIdent(role)}.${quoteIdent(spec.name)} WITH (security_barrier) AS ${body}`,
    comment: `${VIEW_COMMENT_MARK}${body}`,
  };
}
