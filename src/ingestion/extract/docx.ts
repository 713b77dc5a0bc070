// DOCX text through a zip reader with a hard bound on decompressed bytes (a zip bomb fails, never fills memory): word/document.xml paragraphs as text.
import yauzl from 'yauzl';
import { IngestionError } from '../errors.js';
import { decodeXmlEntities } from './html.js';

/** More entries than this is not a word-processing document. */
const MAX_ENTRIES = 10_000;

function openZip(bytes: Buffer): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(bytes, { lazyEntries: true, validateEntrySizes: true, strictFileNames: false }, (err, zip) => (err || !zip ? reject(err) : resolve(zip)));
  });
}

/** Reads word/document.xml, refusing it (and the archive) once more than `maxBytes` has been inflated. */
async function readDocumentXml(bytes: Buffer, maxBytes: number): Promise<string> {
  let zip: yauzl.ZipFile;
  try {
    zip = await openZip(bytes);
  } catch (err) {
    throw new IngestionError('corrupt_document', 'not a readable zip archive', { cause: err });
  }
  if (zip.entryCount > MAX_ENTRIES) {
    zip.close();
    throw new IngestionError('corrupt_document', 'too many archive entries');
  }
  return new Promise<string>((resolve, reject) => {
    let settled = false;
    const fail = (e: unknown) => {
      if (settled) return;
      settled = true;
      zip.close();
      reject(e instanceof IngestionError ? e : new IngestionError('corrupt_document', 'the archive is damaged', { cause: e }));
    };
    zip.on('error', fail);
    zip.on('end', () => fail(new IngestionError('corrupt_document', 'no word/document.xml: not a DOCX')));
    zip.on('entry', (entry: yauzl.Entry) => {
      if (entry.fileName !== 'word/document.xml') {
        zip.readEntry();
        return;
      }
      // The declared size is checked first; the count below holds even when the header lies.
      if (entry.uncompressedSize > maxBytes) return fail(new IngestionError('decompression_bomb', `declares ${entry.uncompressedSize} bytes`));
      zip.openReadStream(entry, (err, stream) => {
        if (err || !stream) return fail(err);
        const chunks: Buffer[] = [];
        let total = 0;
        stream.on('data', (c: Buffer) => {
          total += c.length;
          if (total > maxBytes) {
            stream.destroy();
            fail(new IngestionError('decompression_bomb'));
            return;
          }
          chunks.push(c);
        });
        stream.on('error', fail);
        stream.on('end', () => {
          if (settled) return;
          settled = true;
          zip.close();
          resolve(Buffer.concat(chunks).toString('utf8'));
        });
      });
    });
    zip.readEntry();
  });
}

/** The document's text: one line per paragraph, tabs and breaks kept. */
export async function extractDocx(bytes: Buffer, maxDecompressedBytes: number): Promise<string> {
  const xml = await readDocumentXml(bytes, maxDecompressedBytes);
  const out: string[] = [];
  // <w:p> paragraphs hold runs with <w:t> text, <w:tab/> and <w:br/>.
  const body = xml.replace(/<w:tab\/>/g, '<w:t>\t</w:t>').replace(/<w:br\/>/g, '<w:t>\n</w:t>');
  for (const para of body.split(/<\/w:p>/)) {
    let line = '';
    for (const m of para.matchAll(/<w:t(?:\s[^>]*)?>([^<]*)<\/w:t>/g)) line += m[1];
    if (line !== '') out.push(decodeXmlEntities(line));
  }
  return out.join('\n');
}
