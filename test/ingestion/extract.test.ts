// Extraction units on generated documents: OCR switched off is skipped with a reason, pagination keeps every character, sniffing by bytes over names.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { extract, paginate } from '../../src/ingestion/extract/index.js';
import { sniff } from '../../src/ingestion/sniff.js';
import { htmlToText } from '../../src/ingestion/extract/html.js';
import { pdfWithScannedPage, docx } from './fixtures.js';

const base = { maxExtractChars: 1_000_000, maxDecompressedBytes: 1_000_000, signal: new AbortController().signal, onProgress: () => undefined };

describe('extract', () => {
  it('skips OCR of a scanned page with a reason when OCR is off, and keeps the text pages', async () => {
    const pdf = await pdfWithScannedPage([['First page text']], ['SCANNED']);
    const r = await extract(pdf, { kind: 'pdf', contentType: 'application/pdf' }, { ...base, ocr: { enabled: false, language: 'eng', pageTimeoutMs: 30_000, maxPages: 10 } });
    expect(r.pageCount).toBe(2);
    expect(r.ocrPages).toBe(0);
    expect(r.notes).toEqual(['page 2: ocr skipped: ingestion.ocr.enabled is false']);
    expect(r.pages[0]!.text).toContain('First page text');
  });

  it('stops at ingestion.ocr.max_pages with a note', async () => {
    const pdf = await pdfWithScannedPage([['Text']], ['SCANNED']);
    const r = await extract(pdf, { kind: 'pdf', contentType: 'application/pdf' }, { ...base, ocr: { enabled: true, language: 'eng', pageTimeoutMs: 30_000, maxPages: 0 } });
    expect(r.notes).toEqual(['page 2: ocr skipped: ingestion.ocr.max_pages reached']);
  });

  it('bounds the stored extract and marks it truncated', async () => {
    const r = await extract(Buffer.from('x'.repeat(10_000)), { kind: 'text', contentType: 'text/plain' }, { ...base, maxExtractChars: 5_000, ocr: { enabled: false, language: 'eng', pageTimeoutMs: 1, maxPages: 0 } });
    expect(r.truncated).toBe(true);
    expect(r.pages.reduce((n, p) => n + p.text.length, 0)).toBe(5_000);
  });

  it('paginates text without losing or reordering a character', () => {
    fc.assert(fc.property(fc.string({ maxLength: 20_000 }), fc.integer({ min: 10, max: 5_000 }), (text, size) => paginate(text, size).join('') === text));
  });

  it('sniffs by content: a PDF named .txt is a PDF, a zip that is not a DOCX is refused, binary is refused', async () => {
    expect(sniff(Buffer.from('%PDF-1.7 ...'), 'a.txt', 'text/plain')?.kind).toBe('pdf');
    expect(sniff(docx(['x']), 'a.docx', null)?.kind).toBe('docx');
    expect(sniff(docx(['x']), 'a.zip', 'application/zip')).toBeNull();
    expect(sniff(Buffer.from([0, 1, 2, 3]), 'a.txt', null)).toBeNull();
    expect(sniff(Buffer.from('<!DOCTYPE html><p>x'), 'a', null)?.kind).toBe('html');
  });

  it('HTML text drops scripts, styles and comments and decodes entities', () => {
    expect(htmlToText('<p>a &lt;b&gt; &#x41;&#66;</p><!-- c --><script>d</script><style>e</style><p>f</p>')).toBe('a <b> AB\nf');
  });
});
