// Translation of the earlier console form fields (spec §2 "Form-built policies": cond_*, action_*, raw_*) into the current policy model, reporting every change and drop.
import { OPERATIONS } from '../../governance/policy/index.js';

/** The form field names of spec §2, all strings (the console posts them form-encoded). */
export const FORM_FIELDS = [
  'name', 'priority', 'action_effect', 'action_rate_limit', 'action_redact_columns', 'cond_columns', 'cond_identity_roles',
  'cond_operation', 'cond_roles', 'cond_source_id', 'cond_tables', 'raw_actions', 'raw_conditions',
] as const;
export type FormField = (typeof FORM_FIELDS)[number];

export interface CompatNote {
  /** The legacy field (or `raw_conditions.<key>`) the note is about. */
  field: string;
  /** What happened: mapped (renamed), changed (value rewritten), dropped (not carried over), warning. */
  kind: 'mapped' | 'changed' | 'dropped' | 'warning';
  message: string;
}

export interface CompatProblem {
  field: FormField;
  msg: string;
}

export interface CompatTranslation {
  /** The policy in the current model (conditions/actions still to be validated by the engine). */
  policy: { name: string; priority: number; conditions: Record<string, unknown>; actions: Record<string, unknown>; enabled?: boolean };
  notes: CompatNote[];
  /** Problems that make the entry unusable (e.g. a non-integer priority, raw JSON that is not an object). */
  problems: CompatProblem[];
}

/** Where each current-model key came from in the form, to locate engine errors on the form field. */
export const FORM_FIELD_OF: Readonly<Record<string, FormField>> = {
  'conditions.columns': 'cond_columns',
  'conditions.identity_roles': 'cond_identity_roles',
  'conditions.operations': 'cond_operation',
  'conditions.source_ids': 'cond_source_id',
  'conditions.tables': 'cond_tables',
  'actions.effect': 'action_effect',
  'actions.rate_limit': 'action_rate_limit',
  'actions.redact_columns': 'action_redact_columns',
};

/** Comma-separated list; blanks removed; empty → undefined (the field is omitted, meaning "any"). */
export function splitList(value: unknown): string[] | undefined {
  if (typeof value !== 'string') return undefined;
  const items = value.split(',').map((s) => s.trim()).filter((s) => s !== '');
  return items.length === 0 ? undefined : items;
}

const LEGACY_OPERATIONS: Readonly<Record<string, string>> = {
  select: 'read', get: 'read', query: 'read',
  insert: 'write', update: 'write', delete: 'write', merge: 'write',
  create: 'ddl', alter: 'ddl', drop: 'ddl', truncate: 'ddl',
};

const LEGACY_EFFECTS: Readonly<Record<string, string>> = {
  block: 'deny', reject: 'deny', forbid: 'deny',
  approve: 'require_approval', approval: 'require_approval', 'require-approval': 'require_approval', requireapproval: 'require_approval', review: 'require_approval',
  permit: 'allow', accept: 'allow',
};

/** Legacy singular keys inside raw_conditions, and the current list keys they mean. */
const RAW_CONDITION_KEYS: Readonly<Record<string, string>> = {
  source_id: 'source_ids', operation: 'operations', roles: 'identity_roles', role: 'identity_roles', identity_role: 'identity_roles',
  identity_id: 'identity_ids', team: 'teams', method: 'methods', path: 'paths', table: 'tables', column: 'columns', classification_tag: 'classification_tags', tags: 'classification_tags',
};
const CURRENT_CONDITION_KEYS = new Set(['source_ids', 'identity_roles', 'identity_ids', 'teams', 'operations', 'methods', 'paths', 'tables', 'columns', 'classification_tags']);
const CURRENT_ACTION_KEYS = new Set(['effect', 'rate_limit', 'redact_columns', 'pii_mode', 'cache']);
const RAW_ACTION_KEYS: Readonly<Record<string, string>> = { redact: 'redact_columns', redact_column: 'redact_columns', ratelimit: 'rate_limit', rate: 'rate_limit', pii: 'pii_mode' };

function operationList(values: string[], field: string, notes: CompatNote[]): string[] | undefined {
  const out: string[] = [];
  for (const v of values) {
    const lower = v.toLowerCase();
    if (lower === '*' || lower === 'all' || lower === 'any') {
      notes.push({ field, kind: 'changed', message: `"${v}" means any operation: the condition is omitted` });
      return undefined;
    }
    const mapped = (OPERATIONS as readonly string[]).includes(lower) ? lower : LEGACY_OPERATIONS[lower];
    if (mapped === undefined) out.push(v);
    else {
      if (mapped !== v) notes.push({ field, kind: 'changed', message: `operation "${v}" is now "${mapped}"` });
      out.push(mapped);
    }
  }
  return [...new Set(out)];
}

/** Unqualified table names never match the schema-qualified names the SQL analyser reports, so "users" becomes "*.users". */
function qualifyTables(values: string[], field: string, notes: CompatNote[]): string[] {
  return values.map((t) => {
    if (t.includes('.') || t === '*' || t === '**') return t;
    notes.push({ field, kind: 'changed', message: `table "${t}" is not schema-qualified; translated to "*.${t}" (any schema), since tables are matched by their schema-qualified names` });
    return `*.${t}`;
  });
}

function rawObject(value: unknown, field: 'raw_actions' | 'raw_conditions', problems: CompatProblem[]): Record<string, unknown> {
  if (typeof value !== 'string' || value.trim() === '') return {};
  try {
    const parsed = JSON.parse(value) as unknown;
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    problems.push({ field, msg: 'must be a JSON object' });
  } catch {
    problems.push({ field, msg: 'is not valid JSON' });
  }
  return {};
}

function asList(v: unknown): unknown {
  return Array.isArray(v) ? v : v === undefined || v === null || v === '' ? undefined : [v];
}

/**
 * Translates one legacy form entry. Structured fields first, then raw_conditions/raw_actions merged over
 * them (raw wins, as in the earlier console). Unknown fields are dropped and reported, never guessed.
 */
export function translateLegacyForm(form: Record<string, unknown>): CompatTranslation {
  const notes: CompatNote[] = [];
  const problems: CompatProblem[] = [];
  const conditions: Record<string, unknown> = {};
  const actions: Record<string, unknown> = {};

  const name = typeof form.name === 'string' ? form.name.trim() : '';
  let priority = 0;
  const rawPriority = form.priority;
  if (typeof rawPriority === 'number' && Number.isInteger(rawPriority)) priority = rawPriority;
  else if (typeof rawPriority === 'string' && rawPriority.trim() !== '') {
    if (/^[+-]?\d+$/.test(rawPriority.trim())) priority = Number(rawPriority.trim());
    else problems.push({ field: 'priority', msg: 'Input should be a valid integer' });
  }

  const effectRaw = typeof form.action_effect === 'string' ? form.action_effect.trim() : '';
  const effect = effectRaw === '' ? 'allow' : (LEGACY_EFFECTS[effectRaw.toLowerCase()] ?? effectRaw.toLowerCase());
  if (effectRaw !== '' && effect !== effectRaw) notes.push({ field: 'action_effect', kind: 'changed', message: `effect "${effectRaw}" is now "${effect}"` });
  actions.effect = effect;
  if (typeof form.action_rate_limit === 'string' && form.action_rate_limit.trim() !== '') actions.rate_limit = form.action_rate_limit.trim();
  const redact = splitList(form.action_redact_columns);
  if (redact) actions.redact_columns = redact;

  const sources = splitList(form.cond_source_id);
  if (sources) {
    conditions.source_ids = sources;
    notes.push({ field: 'cond_source_id', kind: 'mapped', message: 'now conditions.source_ids (a list of source id globs)' });
  }
  const ops = splitList(form.cond_operation);
  if (ops) {
    const list = operationList(ops, 'cond_operation', notes);
    if (list) conditions.operations = list;
    notes.push({ field: 'cond_operation', kind: 'mapped', message: 'now conditions.operations (a list)' });
  }
  const identityRoles = splitList(form.cond_identity_roles) ?? [];
  const roles = splitList(form.cond_roles) ?? [];
  if (roles.length > 0) notes.push({ field: 'cond_roles', kind: 'mapped', message: 'cond_roles was the earlier name of cond_identity_roles: merged into conditions.identity_roles' });
  if (identityRoles.length + roles.length > 0) conditions.identity_roles = [...new Set([...identityRoles, ...roles])];
  const tables = splitList(form.cond_tables);
  if (tables) conditions.tables = qualifyTables(tables, 'cond_tables', notes);
  const columns = splitList(form.cond_columns);
  if (columns) conditions.columns = columns;

  mergeRaw(rawObject(form.raw_conditions, 'raw_conditions', problems), conditions, 'raw_conditions', CURRENT_CONDITION_KEYS, RAW_CONDITION_KEYS, notes);
  mergeRaw(rawObject(form.raw_actions, 'raw_actions', problems), actions, 'raw_actions', CURRENT_ACTION_KEYS, RAW_ACTION_KEYS, notes);

  for (const key of Object.keys(form)) {
    if (!(FORM_FIELDS as readonly string[]).includes(key) && key !== 'csrf_token' && key !== 'enabled') {
      notes.push({ field: key, kind: 'dropped', message: 'not a field of the policy form; ignored' });
    }
  }
  if (effect === 'allow' && notes.some((n) => n.kind === 'dropped' && n.field.startsWith('raw_conditions.'))) {
    notes.push({ field: 'raw_conditions', kind: 'warning', message: 'a dropped condition makes this allow policy match more requests; at a high priority it may override a deny' });
  }
  const policy: CompatTranslation['policy'] = { name, priority, conditions, actions };
  if (typeof form.enabled === 'boolean') policy.enabled = form.enabled;
  return { policy, notes, problems };
}

function mergeRaw(
  raw: Record<string, unknown>,
  target: Record<string, unknown>,
  field: 'raw_actions' | 'raw_conditions',
  current: ReadonlySet<string>,
  legacy: Readonly<Record<string, string>>,
  notes: CompatNote[],
): void {
  for (const [key, value] of Object.entries(raw)) {
    const at = `${field}.${key}`;
    let dest = current.has(key) ? key : legacy[key];
    if (dest === undefined) {
      notes.push({ field: at, kind: 'dropped', message: 'no such field in the current policy model; not carried over' });
      continue;
    }
    let v = value;
    if (dest !== key) notes.push({ field: at, kind: 'mapped', message: `now ${field === 'raw_actions' ? 'actions' : 'conditions'}.${dest}` });
    if (field === 'raw_conditions') {
      v = asList(v);
      if (dest === 'tables' && Array.isArray(v) && v.every((t) => typeof t === 'string')) v = qualifyTables(v as string[], at, notes);
      if (dest === 'operations' && Array.isArray(v) && v.every((t) => typeof t === 'string')) v = operationList(v as string[], at, notes);
    } else if (dest === 'redact_columns') {
      v = asList(v);
    } else if (dest === 'pii_mode' && typeof v === 'boolean') {
      notes.push({ field: at, kind: 'changed', message: `pii ${String(v)} is now pii_mode "${v ? 'fast' : 'off'}"` });
      v = v ? 'fast' : 'off';
    }
    if (v === undefined) {
      delete target[dest];
      continue;
    }
    if (target[dest] !== undefined) notes.push({ field: at, kind: 'changed', message: `overrides the structured field for ${dest}` });
    dest = dest as string;
    target[dest] = v;
  }
}
