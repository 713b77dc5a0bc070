// The file_path rule of an ingestion job (docs/ingestion.md "Paths"): a relative path of plain segments, checked before any stage resolves it under a source.

export const MAX_FILE_PATH_LENGTH = 1024;
const MAX_SEGMENTS = 64;

/** Why a job's file_path is refused, or null. Pure; the fetch stage applies its source's containment again. */
export function filePathProblem(p: string): string | null {
  if (p.length === 0) return 'must not be empty';
  if (p.length > MAX_FILE_PATH_LENGTH) return `must be at most ${MAX_FILE_PATH_LENGTH} characters`;
  for (const ch of p) {
    const c = ch.codePointAt(0)!;
    if (c < 0x20 || c === 0x7f) return 'must not contain control characters';
  }
  if (p.includes('\\')) return 'must use "/" as the separator';
  if (p.startsWith('/')) return 'must be relative to the source (no leading "/")';
  if (/[?#]/.test(p)) return 'must not contain "?" or "#"';
  if (/%(2e|2f|5c|00)/i.test(p)) return 'must not contain encoded dots, slashes or NUL';
  const segments = p.split('/');
  if (segments.length > MAX_SEGMENTS) return `must have at most ${MAX_SEGMENTS} segments`;
  for (const s of segments) {
    if (s === '') return 'must not contain empty segments';
    if (s === '.' || s === '..') return 'must not contain "." or ".." segments';
  }
  return null;
}
