// SQL identifier quoting for the statements of managed privileges. Pure.

/** Double-quoted identifier, as quote_ident would produce. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
