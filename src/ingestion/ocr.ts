// OCR of scanned PDF pages and images through Debian's tesseract-ocr (pages rendered by poppler's pdftoppm); absent tools skip OCR with a reason (docs/ingestion.md "OCR").
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface OcrOptions {
  enabled: boolean;
  language: string;
  pageTimeoutMs: number;
}

/** Recognised text is bounded like any extract; more than this from one page is cut. */
const MAX_OCR_OUTPUT_BYTES = 4 * 1024 * 1024;

function run(cmd: string, args: string[], opts: { timeoutMs: number; signal?: AbortSignal | undefined }): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { timeout: opts.timeoutMs, maxBuffer: MAX_OCR_OUTPUT_BYTES, encoding: 'utf8', killSignal: 'SIGKILL', env: { PATH: '/usr/bin:/bin', OMP_THREAD_LIMIT: '1' }, ...(opts.signal ? { signal: opts.signal } : {}) },
      (err, stdout) => (err ? reject(err) : resolve(stdout)),
    );
  });
}

let availability: Promise<string | null> | null = null;

/** Null when OCR can run here, else why not (memoised per process). */
export function ocrUnavailableReason(): Promise<string | null> {
  availability ??= (async () => {
    try {
      await run('tesseract', ['--version'], { timeoutMs: 10_000 });
    } catch {
      return 'tesseract-ocr is not installed';
    }
    try {
      await run('pdftoppm', ['-v'], { timeoutMs: 10_000 });
    } catch {
      return 'poppler-utils (pdftoppm) is not installed';
    }
    return null;
  })();
  return availability;
}

/** A scratch directory for one document's OCR, removed by `close()`. */
export class OcrSession {
  #dir: string | null = null;
  #pdf: string | null = null;

  constructor(
    private readonly opts: OcrOptions,
    private readonly signal?: AbortSignal,
  ) {}

  async #scratch(): Promise<string> {
    this.#dir ??= await mkdtemp(path.join(tmpdir(), 'gh-ocr-'));
    return this.#dir;
  }

  /** Renders page `pageNo` (1-based) of the PDF to a grey PNG and recognises it. */
  async pdfPage(pdf: Uint8Array, pageNo: number): Promise<string> {
    const dir = await this.#scratch();
    if (!this.#pdf) {
      this.#pdf = path.join(dir, 'doc.pdf');
      await writeFile(this.#pdf, pdf);
    }
    const out = path.join(dir, `p${pageNo}`);
    await run('pdftoppm', ['-f', String(pageNo), '-l', String(pageNo), '-r', '200', '-gray', '-png', '-singlefile', this.#pdf, out], { timeoutMs: this.opts.pageTimeoutMs, signal: this.signal });
    const png = `${out}.png`;
    try {
      return await this.#recognise(png);
    } finally {
      await rm(png, { force: true });
    }
  }

  /** Recognises one image (PNG, JPEG, TIFF). */
  async image(bytes: Buffer): Promise<string> {
    const dir = await this.#scratch();
    const file = path.join(dir, 'image');
    await writeFile(file, bytes);
    return this.#recognise(file);
  }

  async #recognise(file: string): Promise<string> {
    return run('tesseract', [file, 'stdout', '-l', this.opts.language, '--psm', '3'], { timeoutMs: this.opts.pageTimeoutMs, signal: this.signal });
  }

  async close(): Promise<void> {
    if (this.#dir) await rm(this.#dir, { recursive: true, force: true });
  }
}
