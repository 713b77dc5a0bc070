// The extract stage: a sniffed document to bounded pages of text — PDF text layers (unpdf), OCR for scanned pages and images, DOCX, HTML and text formats (docs/ingestion.md "Formats").
import { getDocumentProxy } from 'unpdf';
import { IngestionError } from '../errors.js';
import { OcrSession, ocrUnavailableReason, type OcrOptions } from '../ocr.js';
import type { Sniffed } from '../sniff.js';
import { extractDocx } from './docx.js';
import { htmlToText } from './html.js';

export interface ExtractedPage {
  no: number;
  text: string;
  ocr: boolean;
}

export interface Extracted {
  pages: ExtractedPage[];
  /** Pages the document has (a truncated extract may store fewer). */
  pageCount: number;
  ocrPages: number;
  truncated: boolean;
  /** Why something was skipped (OCR unavailable, page cap), for the document record. */
  notes: string[];
}

export interface ExtractOptions {
  maxExtractChars: number;
  maxDecompressedBytes: number;
  ocr: OcrOptions & { maxPages: number };
  signal: AbortSignal;
  onProgress: (current: number, total: number | null) => void;
}

/** Text formats are cut into pages of about this many characters, at line ends, so page ranges mean something. */
export const TEXT_PAGE_CHARS = 4_000;
/** A PDF page with less text than this is treated as scanned. */
const SCANNED_PAGE_MIN_CHARS = 3;

class PageSink {
  readonly pages: ExtractedPage[] = [];
  chars = 0;
  truncated = false;
  constructor(private readonly max: number) {}

  add(no: number, text: string, ocr: boolean): void {
    if (this.truncated) return;
    let t = text;
    if (this.chars + t.length > this.max) {
      t = t.slice(0, Math.max(0, this.max - this.chars));
      this.truncated = true;
    }
    this.chars += t.length;
    this.pages.push({ no, text: t, ocr });
  }
}

export function paginate(text: string, pageChars = TEXT_PAGE_CHARS): string[] {
  if (text.length <= pageChars) return [text];
  const pages: string[] = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(text.length, start + pageChars);
    if (end < text.length) {
      const nl = text.lastIndexOf('\n', end);
      if (nl > start + pageChars / 2) end = nl + 1;
    }
    pages.push(text.slice(start, end));
    start = end;
  }
  return pages;
}

export async function extract(bytes: Buffer, sniffed: Sniffed, opts: ExtractOptions): Promise<Extracted> {
  const sink = new PageSink(opts.maxExtractChars);
  const notes: string[] = [];
  switch (sniffed.kind) {
    case 'pdf':
      return extractPdf(bytes, sink, notes, opts);
    case 'image': {
      const reason = await ocrSkipReason(opts);
      if (reason) {
        notes.push(`ocr skipped: ${reason}`);
        return { pages: [], pageCount: 1, ocrPages: 0, truncated: false, notes };
      }
      const session = new OcrSession(opts.ocr, opts.signal);
      try {
        sink.add(1, await session.image(bytes), true);
      } catch (err) {
        opts.signal.throwIfAborted();
        throw new IngestionError('corrupt_document', 'the image cannot be recognised', { cause: err });
      } finally {
        await session.close();
      }
      opts.onProgress(1, 1);
      return { pages: sink.pages, pageCount: 1, ocrPages: 1, truncated: sink.truncated, notes };
    }
    case 'docx':
      return textPages(await extractDocx(bytes, opts.maxDecompressedBytes), sink, notes, opts);
    case 'html':
      return textPages(htmlToText(bytes.toString('utf8')), sink, notes, opts);
    default:
      return textPages(bytes.toString('utf8'), sink, notes, opts);
  }
}

function textPages(text: string, sink: PageSink, notes: string[], opts: ExtractOptions): Extracted {
  const pages = paginate(text);
  pages.forEach((p, i) => sink.add(i + 1, p, false));
  opts.onProgress(pages.length, pages.length);
  return { pages: sink.pages, pageCount: pages.length, ocrPages: 0, truncated: sink.truncated, notes };
}

async function ocrSkipReason(opts: ExtractOptions): Promise<string | null> {
  if (!opts.ocr.enabled) return 'ingestion.ocr.enabled is false';
  return ocrUnavailableReason();
}

async function extractPdf(bytes: Buffer, sink: PageSink, notes: string[], opts: ExtractOptions): Promise<Extracted> {
  // pdf.js takes ownership of (detaches) the array it is given: hand it a copy, the OCR step needs the bytes.
  let doc: Awaited<ReturnType<typeof getDocumentProxy>>;
  try {
    doc = await getDocumentProxy(new Uint8Array(bytes), { stopAtErrors: true });
  } catch (err) {
    throw new IngestionError('corrupt_document', 'not a readable PDF', { cause: err });
  }
  let session: OcrSession | null = null;
  let ocrPages = 0;
  let ocrReason: string | null | undefined;
  try {
    const total = doc.numPages;
    opts.onProgress(0, total);
    for (let no = 1; no <= total && !sink.truncated; no++) {
      opts.signal.throwIfAborted();
      let text: string;
      try {
        const page = await doc.getPage(no);
        const content = await page.getTextContent();
        text = '';
        for (const item of content.items) {
          if ('str' in item) text += item.str + (item.hasEOL ? '\n' : '');
        }
        page.cleanup();
      } catch (err) {
        throw new IngestionError('corrupt_document', `page ${no} cannot be read`, { cause: err });
      }
      if (text.trim().length < SCANNED_PAGE_MIN_CHARS) {
        ocrReason ??= await ocrSkipReason(opts);
        if (ocrReason) notes.push(`page ${no}: ocr skipped: ${ocrReason}`);
        else if (ocrPages >= opts.ocr.maxPages) notes.push(`page ${no}: ocr skipped: ingestion.ocr.max_pages reached`);
        else {
          session ??= new OcrSession(opts.ocr, opts.signal);
          try {
            text = await session.pdfPage(bytes, no);
          } catch (err) {
            opts.signal.throwIfAborted();
            throw new IngestionError('corrupt_document', `page ${no} cannot be rendered for OCR`, { cause: err });
          }
          ocrPages++;
          sink.add(no, text, true);
          opts.onProgress(no, total);
          continue;
        }
      }
      sink.add(no, text, false);
      opts.onProgress(no, total);
    }
    return { pages: sink.pages, pageCount: total, ocrPages, truncated: sink.truncated, notes };
  } finally {
    await session?.close();
    await doc.loadingTask.destroy();
  }
}
