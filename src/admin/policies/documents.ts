// Import request bodies → policy documents (JSON body, {document, format}, raw YAML/JSON text, the console's policy_payload) and the compat preview built on them.
import { z } from 'zod';
import { parseOrThrow } from '../../http/validation.js';
import type { Policy } from '../../store/schema.js';
import { translateLegacyForm } from './compat.js';
import type { CompatNote, CompatProblem } from './compat.js';
import { DocumentError, documentEntries, MAX_DOCUMENT_BYTES, parseDocumentText, planImport } from './import.js';
import type { DocumentFormat, ImportItem, ImportPlan, Loc, ParsedDocument } from './import.js';

const wrappedSchema = z.strictObject({
  document: z.string().max(MAX_DOCUMENT_BYTES),
  format: z.enum(['json', 'yaml']).optional(),
});

export interface DocumentOptions {
  /** The compat preview also accepts one form entry on its own (an object that is not `{policies: [...]}`). */
  allowSingleObject?: boolean;
}

function entriesOf(doc: unknown, loc: Loc, opts: DocumentOptions): ParsedDocument {
  if (opts.allowSingleObject && doc !== null && typeof doc === 'object' && !Array.isArray(doc) && !('policies' in doc)) {
    return { entries: [doc], listLoc: loc };
  }
  return documentEntries(doc, loc);
}

function formatOf(contentType: string | undefined): DocumentFormat | undefined {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (type.includes('yaml')) return 'yaml';
  if (type === 'application/json') return 'json';
  return undefined;
}

/** The import body: a YAML/text string, `{document, format?}`, or the JSON document itself. */
export function documentFromBody(body: unknown, contentType: string | undefined, opts: DocumentOptions = {}): ParsedDocument {
  if (typeof body === 'string') return entriesOf(parseDocumentText(body, formatOf(contentType), ['body']), ['body'], opts);
  if (body === undefined || body === null) throw new DocumentError([{ loc: ['body'], msg: 'Field required', type: 'missing' }]);
  if (typeof body === 'object' && !Array.isArray(body) && 'document' in body) {
    const wrapped = parseOrThrow(wrappedSchema, 'body', body);
    return entriesOf(parseDocumentText(wrapped.document, wrapped.format, ['body', 'document']), ['body', 'document'], opts);
  }
  return entriesOf(body, ['body'], opts);
}

/** Document text from a form field (`policy_payload`): JSON or YAML, told apart by its first character. */
export function documentFromText(text: string, loc: Loc, opts: DocumentOptions = {}): ParsedDocument {
  return entriesOf(parseDocumentText(text, undefined, loc), loc, opts);
}

export interface CompatItem extends ImportItem {
  notes: CompatNote[];
  problems: CompatProblem[];
  /** The translated policy in the current model, as an import document entry. */
  translated: Record<string, unknown> | null;
}

export interface CompatPreview extends Omit<ImportPlan, 'items'> {
  items: CompatItem[];
  /** The translated policies as an import document (POST it to /api/policies/import/preview or /apply). */
  document: { policies: Record<string, unknown>[] };
}

/** Translates every legacy form entry, then plans the translated entries as an import against the stored policies. */
export function compatPreview(doc: ParsedDocument, existing: readonly Policy[]): CompatPreview {
  const translations = doc.entries.map((raw) => {
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return null;
    return translateLegacyForm(raw as Record<string, unknown>);
  });
  const translated = translations.map((t) => (t === null ? null : { ...t.policy }));
  const plan = planImport({ entries: translated.map((t) => t ?? {}), listLoc: doc.listLoc }, existing);
  const items: CompatItem[] = plan.items.map((item, i) => {
    const t = translations[i] ?? null;
    if (t === null) {
      return { ...item, status: 'invalid', reasons: ['the entry is not an object of form fields'], notes: [], problems: [], translated: null };
    }
    if (t.problems.length > 0) {
      const reasons = t.problems.map((p) => `${p.field}: ${p.msg}`);
      return { ...item, status: 'invalid', reasons: [...reasons, ...(item.status === 'invalid' ? item.reasons : [])], notes: t.notes, problems: t.problems, translated: translated[i] ?? null };
    }
    return { ...item, notes: t.notes, problems: [], translated: translated[i] ?? null };
  });
  const summary = { create: 0, update: 0, unchanged: 0, invalid: 0 };
  for (const i of items) summary[i.status] += 1;
  return {
    valid: summary.invalid === 0,
    summary,
    items,
    document: { policies: items.filter((i) => i.status !== 'invalid' && i.translated !== null).map((i) => i.translated!) },
  };
}
