// How a redacted SQL result value is written for its column's type, so drivers can still parse it: text-like types carry the marker, JSON is redacted inside and stays JSON, every other type becomes NULL.
import type { RowScanResult } from './scanner.js';

/** How a redacted value of a column is written. */
export type RedactAs = 'marker' | 'json' | 'null';

/**
 * Types whose values are free text, so `[REDACTED:<type>]` is a valid value of them: text, varchar, bpchar (the
 * marker may be longer than the column's length: drivers do not check it), name, and unknown (an untyped literal).
 * @see https://github.com/postgres/postgres/blob/master/src/include/catalog/pg_type.dat
 */
const MARKER_TYPES: ReadonlySet<number> = new Set([25, 1043, 1042, 19, 705]);
/** json and jsonb: redacted inside, so the value is still a JSON document. */
const JSON_TYPES: ReadonlySet<number> = new Set([114, 3802]);

/**
 * Every other type (inet, numeric, integers, dates, uuid, arrays, bytea, xml, enums, domains, extension types whose
 * OIDs are not fixed, ...) gets NULL: a marker such as `[REDACTED:ip_address]/24` in an inet column broke drivers'
 * type parsers, and no mask is valid for every value of every type.
 */
export function redactAs(typeOid: number): RedactAs {
  if (MARKER_TYPES.has(typeOid)) return 'marker';
  if (JSON_TYPES.has(typeOid)) return 'json';
  return 'null';
}

/** A JSON document redacted inside: the scanner's JSON walk (pii.scanJson), its value and how many values it replaced. */
export type JsonRedactor = (value: unknown) => { value: unknown; redactions: number };

/**
 * Wraps a row redactor that works on text values (pii.rowRedactor) so each value it changed is written as its column's
 * type allows. A JSON value is redacted by walking the document (keys, strings, numbers); if that walk finds nothing the
 * text scan found (a match spanning JSON syntax), the text-redacted value is sent as one JSON string instead, never the
 * original. Unchanged values, NULLs included, pass through.
 */
export function typedRowRedactor(
  typeOids: readonly number[],
  redactRow: (values: readonly (string | null)[]) => RowScanResult,
  redactJson: JsonRedactor,
): (values: readonly (string | null)[]) => RowScanResult {
  const forms = typeOids.map(redactAs);
  return (values) => {
    const r = redactRow(values);
    if (r.redactions === 0 && !r.failedClosed) return r;
    for (let i = 0; i < forms.length; i++) {
      const before = values[i];
      const after = r.values[i];
      if (after === before || before === null || before === undefined) continue;
      const form = forms[i]!;
      if (form === 'null') r.values[i] = null;
      else if (form === 'json') r.values[i] = jsonRedaction(before, after ?? '', redactJson);
    }
    return r;
  };
}

/** A value replaced whole by the text redactor is exactly one marker. */
const WHOLE_MARKER = /^\[REDACTED:[a-z0-9_]+\]$/;

function jsonRedaction(original: string, redacted: string, redactJson: JsonRedactor): string {
  if (WHOLE_MARKER.test(redacted)) return JSON.stringify(redacted);
  let document: unknown;
  try {
    document = JSON.parse(original);
  } catch {
    return JSON.stringify(redacted);
  }
  const inside = redactJson(document);
  return inside.redactions > 0 ? JSON.stringify(inside.value) : JSON.stringify(redacted);
}
