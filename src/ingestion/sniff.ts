// Content type sniffing for ingestion (docs/ingestion.md "Formats"): magic bytes first, then the text shape; a declared type or extension only breaks ties.

export type DocumentKind = 'pdf' | 'docx' | 'html' | 'markdown' | 'csv' | 'json' | 'text' | 'image';

export interface Sniffed {
  kind: DocumentKind;
  /** The media type recorded on the document. */
  contentType: string;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function startsWith(buf: Buffer, bytes: readonly number[]): boolean {
  if (buf.length < bytes.length) return false;
  for (let i = 0; i < bytes.length; i++) if (buf[i] !== bytes[i]) return false;
  return true;
}

function extOf(filePath: string): string {
  const base = filePath.slice(filePath.lastIndexOf('/') + 1);
  const dot = base.lastIndexOf('.');
  return dot > 0 ? base.slice(dot + 1).toLowerCase() : '';
}

const IMAGE_MAGIC: ReadonlyArray<readonly [readonly number[], string]> = [
  [[0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'image/png'],
  [[0xff, 0xd8, 0xff], 'image/jpeg'],
  [[0x49, 0x49, 0x2a, 0x00], 'image/tiff'],
  [[0x4d, 0x4d, 0x00, 0x2a], 'image/tiff'],
];

/** The kind of a document, or null when it is binary of a kind ingestion cannot extract. */
export function sniff(bytes: Buffer, filePath: string, declared: string | null): Sniffed | null {
  // A PDF header may follow up to 1 KiB of junk (PDF 32000-1 §7.5.2 tolerance used by readers).
  if (bytes.subarray(0, 1024).includes('%PDF-')) return { kind: 'pdf', contentType: 'application/pdf' };
  if (startsWith(bytes, [0x50, 0x4b, 0x03, 0x04])) {
    // Only DOCX among zip containers; the extractor checks it really is one.
    const ext = extOf(filePath);
    const decl = (declared ?? '').toLowerCase();
    if (ext === 'docx' || decl.includes('wordprocessingml')) return { kind: 'docx', contentType: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document' };
    return null;
  }
  for (const [magic, type] of IMAGE_MAGIC) if (startsWith(bytes, magic)) return { kind: 'image', contentType: type };

  const head = bytes.subarray(0, 64 * 1024);
  if (head.includes(0)) return null;
  let text: string;
  try {
    // A cut multi-byte character at the 64 KiB boundary is not binary: retry without the last 3 bytes.
    text = utf8.decode(head.length === bytes.length ? head : head.subarray(0, Math.max(0, head.length - 3)));
  } catch {
    return null;
  }
  const ext = extOf(filePath);
  const decl = (declared ?? '').split(';')[0]!.trim().toLowerCase();
  const trimmed = text.trimStart().slice(0, 512).toLowerCase();
  if (decl === 'text/html' || ext === 'html' || ext === 'htm' || trimmed.startsWith('<!doctype html') || trimmed.startsWith('<html')) return { kind: 'html', contentType: 'text/html' };
  if (decl === 'application/json' || ext === 'json' || ((trimmed.startsWith('{') || trimmed.startsWith('[')) && decl !== 'text/plain')) return { kind: 'json', contentType: 'application/json' };
  if (decl === 'text/markdown' || ext === 'md' || ext === 'markdown') return { kind: 'markdown', contentType: 'text/markdown' };
  if (decl === 'text/csv' || ext === 'csv') return { kind: 'csv', contentType: 'text/csv' };
  return { kind: 'text', contentType: 'text/plain' };
}
