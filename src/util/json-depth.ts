// How deep a JSON text nests, found by one linear scan without parsing: the bound is checked before JSON.parse, zod, the MCP SDK or JSON.stringify (all recursive) ever see the value.

/**
 * Nesting allowed in JSON an agent sends to the MCP endpoint (tool arguments, JSON-RPC envelope included). Tool
 * arguments need a handful of levels; 64 leaves room for JSON bodies of `http_request` while keeping every recursive
 * walk far from the stack's limit (docs/mcp.md).
 */
export const MAX_JSON_DEPTH = 64;

const OPEN_OBJECT = 0x7b; // {
const OPEN_ARRAY = 0x5b; // [
const CLOSE_OBJECT = 0x7d; // }
const CLOSE_ARRAY = 0x5d; // ]
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

/**
 * True when the text opens more than `max` arrays or objects inside each other. Brackets inside strings do not count;
 * the text need not be valid JSON (an invalid text is JSON.parse's to refuse), so an unbalanced text never throws here.
 */
export function jsonDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
      continue;
    }
    if (c === QUOTE) inString = true;
    else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (++depth > max) return true;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) depth--;
  }
  return false;
}
