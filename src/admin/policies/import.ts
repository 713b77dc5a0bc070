// Policy import: bounded JSON/YAML document parsing and the plan (create / update / unchanged / invalid per policy, matched by name).
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import type { ValidationErrorItem } from '../../http/validation.js';
import type { Policy } from '../../store/schema.js';
import { canonical, checkPolicyBody, issuesAt, policyName, policyPriority } from './model.js';
import type { NewPolicy } from './writes.js';

export const MAX_DOCUMENT_BYTES = 1024 * 1024;
export const MAX_IMPORT_POLICIES = 1000;

export type DocumentFormat = 'json' | 'yaml';

export type Loc = (string | number)[];

/** A parsed document: its entries, and where each entry sits (for 422 locations such as ["body","policies",3,"actions"]). */
export interface ParsedDocument {
  entries: unknown[];
  /** Location of the list inside the request, e.g. ["body"] or ["body","document","policies"]. */
  listLoc: Loc;
}

export class DocumentError extends Error {
  constructor(readonly items: ValidationErrorItem[]) {
    super(items[0]?.msg ?? 'invalid document');
    this.name = 'DocumentError';
  }
}

/** Parses document text; YAML is parsed with bounded aliases (no alias bombs) and unique keys. JSON is YAML too, but is parsed as JSON when declared or obvious. */
export function parseDocumentText(text: string, format: DocumentFormat | undefined, loc: Loc): unknown {
  if (Buffer.byteLength(text, 'utf8') > MAX_DOCUMENT_BYTES) {
    throw new DocumentError([{ loc, msg: `The document exceeds ${MAX_DOCUMENT_BYTES} bytes.`, type: 'value_error.too_big' }]);
  }
  if (text.trim() === '') throw new DocumentError([{ loc, msg: 'The document is empty.', type: 'missing' }]);
  const asJson = format === 'json' || (format === undefined && /^\s*[[{]/.test(text));
  try {
    if (asJson) return JSON.parse(text) as unknown;
    return parseYaml(text, { maxAliasCount: 100, uniqueKeys: true, prettyErrors: false }) as unknown;
  } catch (err) {
    const what = asJson ? 'JSON' : 'YAML';
    // The parser's message names line/column only; it never echoes document content beyond a short excerpt.
    const detail = err instanceof Error ? err.message.split('\n')[0]!.slice(0, 200) : 'syntax error';
    throw new DocumentError([{ loc, msg: `The document is not valid ${what}: ${detail}`, type: 'value_error.syntax' }]);
  }
}

/** Accepts a list of policies or `{policies: [...]}`; `loc` is where the document sits in the request. */
export function documentEntries(doc: unknown, loc: Loc): ParsedDocument {
  let entries: unknown;
  let listLoc: Loc = loc;
  if (Array.isArray(doc)) entries = doc;
  else if (doc !== null && typeof doc === 'object' && Array.isArray((doc as { policies?: unknown }).policies)) {
    const extra = Object.keys(doc).filter((k) => k !== 'policies');
    if (extra.length > 0) throw new DocumentError(extra.map((k) => ({ loc: [...loc, k], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' })));
    entries = (doc as { policies: unknown[] }).policies;
    listLoc = [...loc, 'policies'];
  } else {
    throw new DocumentError([{ loc, msg: 'The document must be a list of policies or an object {"policies": [...]}.', type: 'type_error' }]);
  }
  const list = entries as unknown[];
  if (list.length > MAX_IMPORT_POLICIES) {
    throw new DocumentError([{ loc: listLoc, msg: `At most ${MAX_IMPORT_POLICIES} policies per import (got ${list.length}).`, type: 'value_error.too_big' }]);
  }
  return { entries: list, listLoc };
}

/**
 * One imported policy: the create shape (spec §2). `id`, `created_at` and `updated_at` are accepted and
 * ignored so that the output of GET /api/policies can be imported again; matching is by name.
 */
const importEntrySchema = z.strictObject({
  name: policyName,
  conditions: z.record(z.string(), z.unknown()),
  actions: z.record(z.string(), z.unknown()),
  priority: policyPriority.default(0),
  enabled: z.boolean().default(true),
  id: z.unknown().optional(),
  created_at: z.unknown().optional(),
  updated_at: z.unknown().optional(),
});

export type ImportStatus = 'create' | 'update' | 'unchanged' | 'invalid';

export interface FieldChange {
  before: unknown;
  after: unknown;
}

export interface ImportItem {
  index: number;
  name: string | null;
  status: ImportStatus;
  /** The existing policy this entry matched by name. */
  policy_id: number | null;
  reasons: string[];
  /** Validation problems of an invalid entry, with their location in the request. */
  errors?: ValidationErrorItem[];
  /** For updates: the fields that change. */
  changes?: Record<string, FieldChange>;
  /** The policy as it will be stored (absent for invalid entries). */
  policy?: NewPolicy;
}

export interface ImportPlan {
  valid: boolean;
  summary: Record<ImportStatus, number>;
  items: ImportItem[];
}

const COMPARED = ['priority', 'enabled', 'conditions', 'actions'] as const;

function zodItems(loc: Loc, error: z.ZodError): ValidationErrorItem[] {
  return error.issues.map((i) => {
    const at = [...loc, ...i.path.map((p) => (typeof p === 'number' ? p : String(p)))];
    if (i.code === 'invalid_type' && i.input === undefined) return { loc: at, msg: 'Field required', type: 'missing' };
    if (i.code === 'unrecognized_keys') return { loc: at, msg: `unknown field(s): ${i.keys.join(', ')}`, type: 'extra_forbidden' };
    return { loc: at, msg: i.message, type: `value_error.${i.code}` };
  });
}

/** Validates every entry and compares it with the stored policy of the same name. Pure: the caller loads `existing`. */
export function planImport(doc: ParsedDocument, existing: readonly Policy[]): ImportPlan {
  const byName = new Map(existing.map((p) => [p.name, p]));
  const firstIndex = new Map<string, number>();
  const items: ImportItem[] = doc.entries.map((raw, index): ImportItem => {
    const loc: Loc = [...doc.listLoc, index];
    const rawName = raw !== null && typeof raw === 'object' && typeof (raw as { name?: unknown }).name === 'string' ? (raw as { name: string }).name.trim() : null;
    const parsed = importEntrySchema.safeParse(raw);
    if (!parsed.success) {
      const errors = zodItems(loc, parsed.error);
      return { index, name: rawName, status: 'invalid', policy_id: null, reasons: errors.map((e) => `${e.loc.slice(doc.listLoc.length + 1).join('.') || 'entry'}: ${e.msg}`), errors };
    }
    const entry = parsed.data;
    const checked = checkPolicyBody(entry.conditions, entry.actions);
    if (!checked.ok) {
      const errors = issuesAt(loc, checked.issues);
      return { index, name: entry.name, status: 'invalid', policy_id: null, reasons: checked.issues.map((i) => `${i.loc.join('.')}: ${i.msg}`), errors };
    }
    const seen = firstIndex.get(entry.name);
    if (seen !== undefined) {
      const msg = `the name "${entry.name}" appears earlier in the document (entry ${seen})`;
      return { index, name: entry.name, status: 'invalid', policy_id: null, reasons: [msg], errors: [{ loc: [...loc, 'name'], msg, type: 'value_error.duplicate' }] };
    }
    firstIndex.set(entry.name, index);
    const policy: NewPolicy = { name: entry.name, priority: entry.priority, enabled: entry.enabled, conditions: checked.conditions, actions: checked.actions };
    const current = byName.get(entry.name);
    if (current === undefined) return { index, name: entry.name, status: 'create', policy_id: null, reasons: ['no policy with this name exists'], policy };
    const changes: Record<string, FieldChange> = {};
    for (const field of COMPARED) {
      if (canonical(current[field]) !== canonical(policy[field])) changes[field] = { before: current[field], after: policy[field] };
    }
    const changed = Object.keys(changes);
    if (changed.length === 0) return { index, name: entry.name, status: 'unchanged', policy_id: current.id, reasons: ['identical to the stored policy'], policy };
    return { index, name: entry.name, status: 'update', policy_id: current.id, reasons: [`changes ${changed.join(', ')}`], changes, policy };
  });
  const summary: Record<ImportStatus, number> = { create: 0, update: 0, unchanged: 0, invalid: 0 };
  for (const i of items) summary[i.status] += 1;
  return { valid: summary.invalid === 0, summary, items };
}

/** All 422 items of an invalid plan, in document order. */
export function planErrors(plan: ImportPlan): ValidationErrorItem[] {
  return plan.items.flatMap((i) => i.errors ?? []);
}
