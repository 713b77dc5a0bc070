// The document tools `search_documents` and `read_document` (docs/ingestion.md "MCP tools"): ingested documents through the shared decision stages — grant, source role and policy for a GET of the document's path, rate limit — with redaction applied on the way out.
import { z } from 'zod';
import { GatehouseError } from '../../errors/registry.js';
import { applyPolicy, authenticateIdentity, checkSourceRole, enforceRateLimit, validateInput } from '../../pipeline/decide.js';
import { runStages } from '../../pipeline/run.js';
import type { GovernedRequest, Stage } from '../../pipeline/context.js';
import type { PiiMode, PiiScanner } from '../../governance/pii/index.js';
import { getDocument, readPages } from '../../store/repos/documents.js';
import { searchPages } from '../../store/repos/document-search.js';
import { SearchQueryError } from '../../store/errors.js';
import { listGrantsForIdentity } from '../../store/repos/grants.js';
import { filePathProblem } from '../../ingestion/paths.js';
import { SOURCE_ID_PATTERN, SOURCE_ID_RULE, governedRequest, structuredResult, type ToolDefinition, type ToolRun } from './context.js';

/** Source types whose documents are ingested. */
const DOCUMENT_SOURCE_TYPES = new Set(['files', 'http']);
export const SEARCH_MAX_LIMIT = 50;
export const READ_MAX_PAGES = 50;
const SNIPPET_CHARS = 300;

/**
 * Step 2b for documents: the source must be registered, enabled and hold documents; the document's path is what
 * source roles and policies match, as a GET of that path (the same rules as a proxied GET; for `files` sources too).
 */
const resolveDocumentSource: Stage = {
  name: 'resolve_source',
  run(req, deps) {
    const source = deps.lookupSource(req.sourceId);
    if (!source || !source.enabled || !DOCUMENT_SOURCE_TYPES.has(source.source_type)) throw new GatehouseError('unknown_source');
    req.source = source;
    const checked = req.httpPath!;
    req.httpTarget = { url: new URL(`document://${source.source_id}${checked.canonical || '/'}`), path: checked.path, query: '', deeperPaths: checked.deeperPaths };
  },
};

/** The decision stages of a document read, in the order of spec §4 (egress, cache and upstream do not apply: the extract is local). */
const documentStages: readonly Stage[] = [validateInput, authenticateIdentity, resolveDocumentSource, checkSourceRole, applyPolicy, enforceRateLimit];

function documentRequest(run: ToolRun, sourceId: string, path: string): GovernedRequest {
  const rawTarget = `/proxy/${sourceId}/${path === '' ? '' : path.split('/').map(encodeURIComponent).join('/')}`;
  return governedRequest(run, sourceId, { kind: 'http', method: 'GET', rawTarget, headers: {}, body: null });
}

/**
 * Runs the decision for reading `path` of `sourceId` (`''`: the source itself); returns the redaction it obliges or
 * throws the refusal. `record` makes it the call's decision in its audit entry; a search filters each hit without that.
 */
async function decideRead(run: ToolRun, sourceId: string, path: string, opts: { record: boolean }): Promise<{ mode: PiiMode; redactColumns: readonly string[] }> {
  const req = documentRequest(run, sourceId, path);
  if (opts.record) await runStages(documentStages, req, run.deps.pipeline);
  else for (const stage of documentStages) if (stage !== enforceRateLimit) await stage.run(req, run.deps.pipeline);
  const obligations = req.policyDecision!.obligations;
  return { mode: obligations.pii_mode ?? run.deps.pipeline.config.pii.default_mode, redactColumns: obligations.redact_columns };
}

/** Redacted text, failing closed: a scan that cannot finish replaces the text. */
function redact(pii: PiiScanner, text: string, o: { mode: PiiMode; redactColumns: readonly string[] }): { text: string; redactions: number } {
  const r = pii.scanText(text, { mode: o.mode, redactColumns: o.redactColumns });
  return { text: r.text, redactions: r.redactions };
}

function snippet(text: string, query: string): string {
  const words = query.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) ?? [];
  const lower = text.toLowerCase();
  let at = -1;
  for (const w of words) {
    at = lower.indexOf(w);
    if (at >= 0) break;
  }
  const start = Math.max(0, (at < 0 ? 0 : at) - SNIPPET_CHARS / 3);
  const cut = text.slice(start, start + SNIPPET_CHARS).replace(/\s+/g, ' ').trim();
  return `${start > 0 ? '…' : ''}${cut}${start + SNIPPET_CHARS < text.length ? '…' : ''}`;
}

const docPath = z
  .string()
  .min(1)
  .max(1024)
  .superRefine((p, ctx) => {
    const problem = filePathProblem(p);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

export const searchDocumentsSchema = z.strictObject({
  query: z.string().trim().min(1).max(512).describe('Words to find; "quoted phrases", -excluded words and OR are understood.'),
  source: z.string().regex(SOURCE_ID_PATTERN, SOURCE_ID_RULE).optional().describe('Only this source (one you are granted); all your document sources when absent.'),
  limit: z.number().int().min(1).max(SEARCH_MAX_LIMIT).default(10),
});

export const readDocumentSchema = z.strictObject({
  source: z.string().regex(SOURCE_ID_PATTERN, SOURCE_ID_RULE),
  path: docPath.describe('The document path within the source, as search_documents returns it.'),
  page_from: z.number().int().min(1).default(1),
  page_to: z.number().int().min(1).optional().describe(`Last page (inclusive); at most ${READ_MAX_PAGES} pages per call.`),
});

export const searchDocumentsTool: ToolDefinition<typeof searchDocumentsSchema> = {
  name: 'search_documents',
  title: 'Search documents',
  description:
    'Full-text search over the ingested documents of sources you are granted (PDF, DOCX, HTML, text…). Returns the best pages: {source, path, page, snippet}; personal data in snippets is redacted as your policies say. Read a page with read_document.',
  schema: searchDocumentsSchema,
  readOnly: true,
  async run(args, run) {
    run.audit.set({ source_id: args.source ?? null, path: null });
    const { pii } = run.deps.pipeline;
    let sources: string[];
    if (args.source) {
      // Refused exactly like a read of the source itself: no grant, no answer (and no hint that it exists).
      await decideRead(run, args.source, '', { record: true });
      sources = [args.source];
    } else {
      const now = Date.now();
      const granted = (await listGrantsForIdentity(run.deps.db, run.caller.identity.id)).filter((g) => g.enabled && (g.expires_at === null || g.expires_at.getTime() > now));
      sources = [...new Set(granted.map((g) => g.source_id))].filter((s) => DOCUMENT_SOURCE_TYPES.has(run.deps.pipeline.lookupSource(s)?.source_type ?? ''));
    }
    // Over-fetch, then keep only pages of documents the caller may read (role and policy by path). The sources were
    // filtered by grant above; the search applies that filter before its limit (decision record 0026 §4).
    const hits = await searchPages(run.deps.db, args.query, sources, args.limit * 4).catch((error: unknown) => {
      throw error instanceof SearchQueryError ? new GatehouseError('invalid_request', error.message) : error;
    });
    const decisions = new Map<string, { mode: PiiMode; redactColumns: readonly string[] } | null>();
    const results: Array<{ source: string; path: string; page: number; snippet: string; rank: number }> = [];
    let redactions = 0;
    for (const h of hits) {
      if (results.length >= args.limit) break;
      const key = `${h.source_id}\u0000${h.path}`;
      if (!decisions.has(key)) decisions.set(key, await decideRead(run, h.source_id, h.path, { record: false }).catch(() => null));
      const d = decisions.get(key)!;
      if (!d) continue;
      const r = redact(pii, snippet(h.text, args.query), d);
      redactions += r.redactions;
      results.push({ source: h.source_id, path: h.path, page: h.page_no, snippet: r.text, rank: Math.round(h.rank * 1e6) / 1e6 });
    }
    const text = results.length === 0 ? 'No matching documents.' : results.map((r) => `${r.source}:${r.path} p.${r.page}: ${r.snippet}`).join('\n');
    return { result: structuredResult({ results }, text), audit: { redactions } };
  },
};

export const readDocumentTool: ToolDefinition<typeof readDocumentSchema> = {
  name: 'read_document',
  title: 'Read a document',
  description: `Reads pages of an ingested document of a source you are granted (at most ${READ_MAX_PAGES} pages per call). Personal data is redacted as your policies say. Returns {source, path, content_type, page_count, pages: [{page, text}]}.`,
  schema: readDocumentSchema,
  readOnly: true,
  async run(args, run) {
    run.audit.set({ source_id: args.source, path: args.path });
    const to = args.page_to ?? args.page_from + READ_MAX_PAGES - 1;
    if (to < args.page_from) throw new GatehouseError('invalid_request', 'page_to must not be before page_from.');
    if (to - args.page_from + 1 > READ_MAX_PAGES) throw new GatehouseError('invalid_request', `At most ${READ_MAX_PAGES} pages per call.`);
    const decision = await decideRead(run, args.source, args.path, { record: true });
    const doc = await getDocument(run.deps.db, args.source, args.path);
    if (!doc) throw new GatehouseError('not_found', 'No ingested document at this path.');
    const pages = await readPages(run.deps.db, doc.id, args.page_from, to);
    let redactions = 0;
    const out = pages.map((p) => {
      const r = redact(run.deps.pipeline.pii, p.text, decision);
      redactions += r.redactions;
      return { page: p.page_no, text: r.text, ocr: p.ocr };
    });
    const structured = { source: doc.source_id, path: doc.path, content_type: doc.content_type, page_count: doc.page_count, extract_truncated: doc.extract_truncated, pages: out };
    const text = out.map((p) => `--- page ${p.page} ---\n${p.text}`).join('\n') || '(no text on these pages)';
    return { result: structuredResult(structured, text), audit: { redactions } };
  },
};
