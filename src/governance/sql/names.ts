// Qualified names (schema.table, schema.table.column) as one unambiguous string: a part holding a dot or a double quote is written quoted, as PostgreSQL's quote_ident would, so `"my.schema"."my.table"` never reads as four parts.

/** One part of a qualified name: as is, or double-quoted (inner quotes doubled) when it holds `.` or `"`. */
export function namePart(part: string): string {
  return part.includes('.') || part.includes('"') ? `"${part.replace(/"/g, '""')}"` : part;
}

/** Joins the parts of a name (`joinName('my.schema', 'orders')` is `"my.schema".orders`). */
export function joinName(...parts: readonly string[]): string {
  return parts.map(namePart).join('.');
}

/** The parts of a name written by joinName (or by an operator in a rule: `"my.schema".*`): dots inside quotes belong to the part. */
export function splitName(name: string): string[] {
  if (!name.includes('"')) return name.split('.');
  const parts: string[] = [];
  let part = '';
  let quoted = false;
  for (let i = 0; i < name.length; i++) {
    const ch = name[i]!;
    if (quoted) {
      if (ch !== '"') part += ch;
      else if (name[i + 1] === '"') {
        part += '"';
        i++;
      } else quoted = false;
    } else if (ch === '"') quoted = true;
    else if (ch === '.') {
      parts.push(part);
      part = '';
    } else part += ch;
  }
  parts.push(part);
  return parts;
}

/** The separator names are matched with (governance/policy/glob.ts): NUL, which no PostgreSQL identifier can hold. */
export const NAME_SEP = '\u0000';

/** A name with its parts separated by NUL, for matching part by part. */
export function nameSegments(name: string): string {
  return name.includes('"') ? splitName(name).join(NAME_SEP) : name.replaceAll('.', NAME_SEP);
}
