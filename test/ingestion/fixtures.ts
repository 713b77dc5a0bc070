// Real documents generated for ingestion tests: PDFs with a text layer (pdf-lib), a scanned page (text rendered to an image by poppler's pdftoppm), DOCX and zip bombs (a small zip writer), CSV and HTML.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { PDFDocument, StandardFonts } from 'pdf-lib';

const run = promisify(execFile);

/** A PDF whose pages carry the given lines as a real text layer. */
export async function textPdf(pages: readonly string[][]): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (const lines of pages) {
    const page = doc.addPage([595, 842]);
    lines.forEach((line, i) => page.drawText(line, { x: 50, y: 780 - i * 18, size: 12, font }));
  }
  return Buffer.from(await doc.save());
}

/** A PNG of the text, as a scanner would give it: rendered from a one-page PDF by pdftoppm (no text layer survives). */
export async function scannedImage(lines: readonly string[]): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.HelveticaBold);
  const page = doc.addPage([595, 300]);
  lines.forEach((line, i) => page.drawText(line, { x: 40, y: 240 - i * 40, size: 26, font }));
  const dir = await mkdtemp(path.join(tmpdir(), 'gh-scan-'));
  try {
    await writeFile(path.join(dir, 'in.pdf'), await doc.save());
    await run('pdftoppm', ['-r', '150', '-gray', '-png', '-singlefile', path.join(dir, 'in.pdf'), path.join(dir, 'out')]);
    return await readFile(path.join(dir, 'out.png'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Text pages followed by one scanned page (an image only). */
export async function pdfWithScannedPage(textPages: readonly string[][], scannedLines: readonly string[]): Promise<Buffer> {
  const doc = await PDFDocument.load(await textPdf(textPages));
  const png = await doc.embedPng(await scannedImage(scannedLines));
  const page = doc.addPage([595, 300]);
  page.drawImage(png, { x: 0, y: 0, width: 595, height: 300 });
  return Buffer.from(await doc.save());
}

interface ZipEntry {
  name: string;
  data: Buffer;
  /** Write this as the uncompressed size instead of the truth (a lying header). */
  declaredSize?: number;
}

/** A plain zip archive (deflate), written by hand so tests control every header field. */
export function zip(entries: readonly ZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name, 'utf8');
    const compressed = zlib.deflateRawSync(e.data);
    const crc = zlib.crc32(e.data);
    const size = e.declaredSize ?? e.data.length;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6);
    local.writeUInt16LE(8, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(compressed.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    locals.push(local, name, compressed);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(8, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(compressed.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    centrals.push(central, name);
    offset += 30 + name.length + compressed.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}

const CONTENT_TYPES = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`;

function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function documentXml(paragraphs: readonly string[]): string {
  const body = paragraphs.map((p) => `<w:p><w:r><w:t xml:space="preserve">${escapeXml(p)}</w:t></w:r></w:p>`).join('');
  return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${body}</w:body></w:document>`;
}

export function docx(paragraphs: readonly string[]): Buffer {
  return zip([
    { name: '[Content_Types].xml', data: Buffer.from(CONTENT_TYPES) },
    { name: 'word/document.xml', data: Buffer.from(documentXml(paragraphs)) },
  ]);
}

/** A DOCX whose document.xml inflates to `bytes` (mostly one repeated character); optionally lying about its size. */
export function docxBomb(bytes: number, opts: { lie?: boolean } = {}): Buffer {
  const xml = Buffer.alloc(bytes, 0x20);
  Buffer.from(documentXml(['bomb'])).copy(xml, 0);
  return zip([
    { name: '[Content_Types].xml', data: Buffer.from(CONTENT_TYPES) },
    { name: 'word/document.xml', data: xml, ...(opts.lie ? { declaredSize: 1000 } : {}) },
  ]);
}
