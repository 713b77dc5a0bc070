// The console pages of policies under /dashboard/policies: the list in evaluation order, the spec §2 form-built create/update, raw JSON editing, import preview / apply / compat preview, and the dry run with its trace.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { EFFECTS, OPERATIONS, HTTP_METHODS } from '../../governance/policy/index.js';
import { GatehouseError } from '../../errors/registry.js';
import { validationError, type ValidationErrorItem } from '../../http/validation.js';
import { getPolicyById, listPolicies } from '../../store/repos/policies.js';
import { listIdentities } from '../../store/repos/identities.js';
import { listDataSources } from '../../store/repos/data-sources.js';
import type { Policy } from '../../store/schema.js';
import type { AdminModuleContext } from '../module.js';
import { callApi } from '../console/api-call.js';
import { demand, pageContext, sendPage, type PageContext } from '../console/context.js';
import { DataTable } from '../console/data-table.js';
import { checkbox, ConsoleForm, emptyForm, Field, CheckboxField, intText, keptValues, registerConsoleForm, registerFormPage, requiredText, SelectField, TextAreaField, type FormState } from '../console/forms.js';
import { Layout } from '../console/layout.js';
import { EnabledBadge, PostButton, Time, pageId } from '../console/ui.js';
import type { CompatPreview } from './documents.js';
import { translateLegacyForm } from './compat.js';
import { canonical } from './model.js';
import type { DryRunResult } from './dry-run.js';
import type { ImportItem, ImportPlan } from './import.js';

const BASE = '/dashboard/policies';
const crumbs = (...more: Array<{ label: string; href?: string }>) => [{ label: 'Policies', href: BASE }, ...more];

/** The answer of an import form: a preview, an applied import, or the compat preview of earlier form fields. */
export type ImportOutcome =
  | { kind: 'preview'; result: ImportPlan }
  | { kind: 'apply'; result: { summary: ImportPlan['summary']; policy_version: number; items: Array<Pick<ImportItem, 'index' | 'name' | 'status' | 'reasons' | 'changes'>> } }
  | { kind: 'compat'; result: CompatPreview };

type ShownItem = Pick<ImportItem, 'index' | 'name' | 'status' | 'reasons' | 'changes'> & { notes?: CompatPreview['items'][number]['notes'] };

/** What the spec §4 policy form endpoints answer a browser with (routes.ts answers API clients with JSON). */
export interface PolicyFormPages {
  saved(reply: FastifyReply, id: number): FastifyReply;
  imported(req: FastifyRequest, reply: FastifyReply, outcome: ImportOutcome): Promise<FastifyReply>;
  dryRan(req: FastifyRequest, reply: FastifyReply, result: DryRunResult): Promise<FastifyReply>;
}

/** Spec §2 "Form-built policies": the fields and their defaults (every one a string; empty means "not given"). */
const FORM_DEFAULTS: Readonly<Record<string, string>> = {
  name: '',
  priority: '0',
  action_effect: 'allow',
  action_rate_limit: '',
  action_redact_columns: '',
  cond_columns: '',
  cond_identity_roles: '',
  cond_operation: '',
  cond_roles: '',
  cond_source_id: '',
  cond_tables: '',
  raw_actions: '',
  raw_conditions: '',
};

/** A list of strings none of which holds a comma can stand in a comma-separated field; anything else stays in the raw JSON. */
function takeList(from: Record<string, unknown>, key: string, ok: (s: string) => boolean = () => true): string {
  const v = from[key];
  if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === 'string' && !x.includes(',') && x.trim() === x && ok(x))) return '';
  delete from[key];
  return v.join(', ');
}

/**
 * A stored policy as the form's fields, so that posting the form unchanged stores the same policy: what the
 * structured fields cannot say exactly (unqualified table names, which the form would qualify; numbers; other
 * keys) stays in raw_conditions / raw_actions.
 */
export function formValuesOf(p: Pick<Policy, 'name' | 'priority' | 'conditions' | 'actions'>): Record<string, string> {
  const c = { ...(p.conditions as Record<string, unknown>) };
  const a = { ...(p.actions as Record<string, unknown>) };
  const values: Record<string, string> = { ...FORM_DEFAULTS, name: p.name, priority: String(p.priority) };
  values.cond_source_id = takeList(c, 'source_ids');
  values.cond_operation = takeList(c, 'operations');
  values.cond_identity_roles = takeList(c, 'identity_roles');
  values.cond_tables = takeList(c, 'tables', (t) => t.includes('.') || t === '*' || t === '**');
  values.cond_columns = takeList(c, 'columns');
  if (typeof a.effect === 'string') {
    values.action_effect = a.effect;
    delete a.effect;
  }
  if (typeof a.rate_limit === 'string') {
    values.action_rate_limit = a.rate_limit;
    delete a.rate_limit;
  }
  values.action_redact_columns = takeList(a, 'redact_columns');
  values.raw_conditions = Object.keys(c).length > 0 ? JSON.stringify(c, null, 2) : '';
  values.raw_actions = Object.keys(a).length > 0 ? JSON.stringify(a, null, 2) : '';
  return values;
}

/** Whether posting the policy's own update form unchanged would store the same conditions and actions (an absent effect is allow). */
function formKeeps(p: Pick<Policy, 'name' | 'priority' | 'conditions' | 'actions'>): boolean {
  const t = translateLegacyForm(formValuesOf(p));
  return t.problems.length === 0 && canonical(t.policy.conditions) === canonical(p.conditions) && canonical(t.policy.actions) === canonical({ effect: 'allow', ...(p.actions as Record<string, unknown>) });
}

function compact(value: unknown): string {
  const s = JSON.stringify(value);
  return s === '{}' ? 'anything' : s;
}

function EffectBadge({ effect }: { effect: string }): JSX.Element {
  const cls = effect === 'allow' ? 'badge ok' : effect === 'deny' ? 'badge bad' : 'badge warn';
  return (
    <span class={cls} safe>
      {effect}
    </span>
  );
}

/** The spec §2 form-built policy fields (create and update post the same fields). */
function PolicyForm({ ctx, form, action, submit }: { ctx: PageContext; form: FormState; action: string; submit: string }): JSX.Element {
  return (
    <ConsoleForm ctx={ctx} form={form} action={action} submit={submit}>
      <Field form={form} name="name" label="Name" required maxlength={255} />
      <Field form={form} name="priority" label="Priority" type="number" value="0" hint="Higher first; ties by id. A deny outranks require_approval, which outranks allow, among the matching policies." />
      <fieldset>
        <legend>Conditions (empty: any)</legend>
        <Field form={form} name="cond_source_id" label="Sources" hint="Comma-separated source id globs, e.g. crm, warehouse-*." />
        <Field form={form} name="cond_operation" label="Operations" hint={`Comma-separated: ${OPERATIONS.join(', ')}.`} />
        <Field form={form} name="cond_identity_roles" label="Identity roles" hint="Comma-separated identity roles." />
        <Field form={form} name="cond_roles" label="Roles (earlier name of identity roles)" hint="Merged into identity roles." />
        <Field form={form} name="cond_tables" label="Tables" hint="Comma-separated, schema-qualified globs, e.g. public.users, *.payments." />
        <Field form={form} name="cond_columns" label="Columns" hint="Comma-separated column globs." />
        <TextAreaField form={form} name="raw_conditions" label="More conditions (JSON object)" rows={4} code hint='Merged over the fields above, e.g. {"methods": ["POST"], "paths": ["/v1/**"]}.' />
      </fieldset>
      <fieldset>
        <legend>Actions</legend>
        <SelectField form={form} name="action_effect" label="Effect" value="allow" options={EFFECTS.map((e) => [e, e] as const)} />
        <Field form={form} name="action_rate_limit" label="Rate limit" hint='e.g. 100/minute or 300/15minutes; empty: none.' />
        <Field form={form} name="action_redact_columns" label="Redact columns" hint="Comma-separated column globs." />
        <TextAreaField form={form} name="raw_actions" label="More actions (JSON object)" rows={3} code hint='e.g. {"pii_mode": "fast", "cache": false}.' />
      </fieldset>
    </ConsoleForm>
  );
}

const jsonEditForm = z.object({
  name: requiredText(255),
  priority: intText(0, -1_000_000, 1_000_000),
  enabled: checkbox(),
  conditions: requiredText(65_536),
  actions: requiredText(65_536),
});

/** A JSON object typed into a textarea, or a 422 item at that field. */
function jsonObjectField(text: string, field: string, items: ValidationErrorItem[]): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
    items.push({ loc: ['body', field], msg: 'must be a JSON object ({...})', type: 'value_error' });
  } catch (err) {
    items.push({ loc: ['body', field], msg: `is not valid JSON: ${err instanceof Error ? err.message.split('\n')[0]!.slice(0, 160) : 'syntax error'}`, type: 'value_error.syntax' });
  }
  return undefined;
}

/** The JSON API's 422 items at the textarea they belong to, each message naming the path inside it (e.g. "actions.rate_limit: …"). */
function itemsAtTextareas(detail: ValidationErrorItem[]): ValidationErrorItem[] {
  return detail.map((d) => {
    const path = d.loc[0] === 'body' ? d.loc.slice(1) : d.loc;
    const field = String(path[0] ?? 'conditions');
    return { ...d, loc: ['body', field], msg: path.length > 1 ? `${path.join('.')}: ${d.msg}` : d.msg };
  });
}

function ImportResults({ outcome }: { outcome: ImportOutcome }): JSX.Element {
  const r = outcome.result;
  const title = outcome.kind === 'apply' ? 'Applied' : outcome.kind === 'compat' ? 'Compat preview (earlier form fields translated)' : 'Preview';
  const items: ShownItem[] = r.items;
  const refused = outcome.kind !== 'apply' && !outcome.result.valid;
  return (
    <section id="import-result" aria-labelledby="import-result-h">
      <h2 id="import-result-h" safe>
        {title}
      </h2>
      <p role="status" safe>
        {`${r.summary.create} to create, ${r.summary.update} to update, ${r.summary.unchanged} unchanged, ${r.summary.invalid} invalid.${outcome.kind === 'apply' ? ` Applied as policy version ${outcome.result.policy_version}.` : refused ? ' Nothing can be applied while an entry is invalid.' : ''}`}
      </p>
      <DataTable
        rows={items}
        empty="The document lists no policies."
        caption={title}
        columns={[
          { label: 'Entry', text: (i) => i.index },
          { label: 'Name', text: (i) => i.name ?? '—' },
          { label: 'Status', cell: (i) => <span class={i.status === 'invalid' ? 'badge bad' : i.status === 'unchanged' ? 'badge' : 'badge ok'} safe>{i.status}</span> },
          { label: 'Reasons', text: (i) => i.reasons.join('; ') },
          { label: 'Changes', text: (i) => (i.changes ? Object.entries(i.changes).map(([k, v]) => `${k}: ${JSON.stringify(v.before)} → ${JSON.stringify(v.after)}`).join('; ') : '') },
          { label: 'Notes', show: outcome.kind === 'compat', text: (i) => (i.notes ?? []).map((n) => `${n.field} (${n.kind}): ${n.message}`).join('; ') },
        ]}
      />
      {outcome.kind === 'compat' ? (
        <>
          <h3>Translated document</h3>
          <p>Paste it into the document field and preview or apply it as an import.</p>
          <pre safe>{JSON.stringify(outcome.result.document, null, 2)}</pre>
        </>
      ) : (
        ''
      )}
    </section>
  );
}

function DryRunResultView({ result }: { result: DryRunResult }): JSX.Element {
  const o = result.obligations;
  return (
    <section id="dry-run-result" aria-labelledby="dry-run-result-h">
      <h2 id="dry-run-result-h">Result</h2>
      <dl class="props">
        <dt>Effect</dt>
        <dd>
          <EffectBadge effect={result.effect} />
        </dd>
        <dt>Operation</dt>
        <dd safe>{result.operation ?? 'not understood'}</dd>
        <dt>Tables</dt>
        <dd safe>{result.tables.length > 0 ? result.tables.join(', ') : '—'}</dd>
        <dt>Columns</dt>
        <dd safe>{result.columns.length > 0 ? result.columns.join(', ') : '—'}</dd>
        <dt>Source role</dt>
        <dd safe>{`${result.source_role.allowed ? 'allows' : 'denies'}${result.source_role.reason ? `: ${result.source_role.reason}` : ''}`}</dd>
        <dt>Deciding policy</dt>
        <dd>{result.deciding_policy_id === null ? 'none' : <a href={`${BASE}/${result.deciding_policy_id}`}>#{result.deciding_policy_id}</a>}</dd>
        <dt>Obligations</dt>
        <dd safe>
          {[
            o.strictest_rate_limit ? `rate limit ${o.strictest_rate_limit.points} per ${o.strictest_rate_limit.durationSec} s (policy #${o.strictest_rate_limit.policy_id})` : 'no rate limit',
            o.redact_columns.length > 0 ? `redact ${o.redact_columns.join(', ')}` : 'no redaction',
            `PII mode ${o.pii_mode ?? 'off'}`,
            o.cache ? 'cacheable' : 'not cached',
          ].join('; ')}
        </dd>
        <dt>Policy version</dt>
        <dd>{result.policy_version}</dd>
      </dl>
      <h3>Reasons</h3>
      <ul>
        {result.reasons.map((r) => (
          <li safe>{r}</li>
        ))}
      </ul>
      <h3>Trace</h3>
      <DataTable
        rows={result.trace.map((t, i) => ({ step: i + 1, t }))}
        empty="No steps."
        caption="Decision trace, in evaluation order"
        columns={[
          { label: 'Step', text: (r) => r.step },
          { label: 'Check', cell: (r) => (r.t.kind === 'source_role' ? 'Source role' : <a href={`${BASE}/${r.t.policy_id}`} safe>{`Policy ${r.t.name} (#${r.t.policy_id})`}</a>) },
          { label: 'Priority', text: (r) => (r.t.kind === 'policy' ? r.t.priority : '') },
          { label: 'Effect', cell: (r) => (r.t.kind === 'policy' ? <EffectBadge effect={r.t.effect} /> : r.t.allowed ? <span class="badge ok">allows</span> : <span class="badge bad">denies</span>) },
          { label: 'Matched', text: (r) => (r.t.kind === 'policy' ? (r.t.matched ? 'yes' : 'no') : '') },
          { label: 'Why', text: (r) => (r.t.kind === 'source_role' ? r.t.reason : r.t.matched ? 'every condition holds' : `${r.t.failed_condition ?? ''} is not ${JSON.stringify(r.t.expected)}`) },
        ]}
      />
    </section>
  );
}

export function registerPolicyPages({ app, api, services }: AdminModuleContext): PolicyFormPages {
  const db = services.db;

  api.describe({ method: 'GET', url: BASE, summary: 'Policies page: the policy set in evaluation order', tags: ['console'], produces: ['text/html'] });
  app.get(BASE, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'policies:read');
    const rows = (await listPolicies(db)).map((p, i) => ({ p, position: i + 1 }));
    const canWrite = ctx.can('policies:write');
    const actions = (
      <>
        {canWrite ? (
          <a class="button" href={`${BASE}/new`}>
            New policy
          </a>
        ) : (
          ''
        )}
        <a class="button secondary" href={`${BASE}/import`}>
          Import
        </a>
        <a class="button secondary" href={`${BASE}/dry-run`}>
          Dry run
        </a>
      </>
    );
    return sendPage(
      reply,
      <Layout ctx={ctx} title="Policies" crumbs={crumbs()} actions={actions}>
        <p>Evaluated in this order: priority high to low, then id. Among the matching policies a deny outranks require_approval, which outranks allow.</p>
        <DataTable
          rows={rows}
          empty="No policies yet: the source roles alone decide."
          columns={[
            { label: 'Order', text: (r) => r.position },
            { label: 'Name', cell: (r) => <a href={`${BASE}/${r.p.id}`} safe>{r.p.name}</a> },
            { label: 'Priority', text: (r) => r.p.priority },
            { label: 'Effect', cell: (r) => <EffectBadge effect={String((r.p.actions as { effect?: unknown }).effect ?? 'allow')} /> },
            { label: 'Conditions', cell: (r) => <code safe>{compact(r.p.conditions)}</code> },
            { label: 'State', cell: (r) => <EnabledBadge enabled={r.p.enabled} /> },
          ]}
        />
      </Layout>,
    );
  });

  // ---- create (spec §4 POST /dashboard/policies/create, handled in routes.ts)

  const newPage = (ctx: PageContext, form: FormState) => {
    demand(ctx, 'policies:write');
    return (
      <Layout ctx={ctx} title="New policy" crumbs={crumbs({ label: 'New policy' })}>
        <PolicyForm ctx={ctx} form={form} action={`${BASE}/create`} submit="Create policy" />
      </Layout>
    );
  };
  api.describe({ method: 'GET', url: `${BASE}/new`, summary: 'The form-built policy create form (spec §2)', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/new`, async (req, reply) => sendPage(reply, newPage(pageContext(req), emptyForm({ ...FORM_DEFAULTS }))));
  registerFormPage(app, 'POST', `${BASE}/create`, (_req, ctx, form) => newPage(ctx, form));

  // ---- import and dry run (before /:id, which they would otherwise look like)

  const importPage = async (ctx: PageContext, form: FormState, outcome?: ImportOutcome) => {
    demand(ctx, 'policies:read');
    const canWrite = ctx.can('policies:write');
    return (
      <Layout ctx={ctx} title="Import policies" crumbs={crumbs({ label: 'Import' })}>
        <p>
          A JSON or YAML document: a list of policies, or <code safe>{'{"policies": [...]}'}</code>, matched to the stored policies by name. Preview shows what would change; apply
          changes everything or, if any entry is invalid, nothing. Compat preview translates policies written in the earlier console form fields (cond_*, action_*, raw_*).
        </p>
        <ConsoleForm ctx={ctx} form={form} action={`${BASE}/import/preview`} submit="Preview">
          <TextAreaField form={form} name="policy_payload" label="Document" rows={14} code required />
          <div class="form-actions">
            <button type="submit" class="button secondary" formaction={`${BASE}/import`}>
              Compat preview
            </button>
            {canWrite ? (
              <button type="submit" class="button danger" formaction={`${BASE}/import/apply`}>
                Apply
              </button>
            ) : (
              ''
            )}
          </div>
        </ConsoleForm>
        {outcome ? <ImportResults outcome={outcome} /> : ''}
      </Layout>
    );
  };
  api.describe({ method: 'GET', url: `${BASE}/import`, summary: 'The policy import form: preview, apply, compat preview', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/import`, async (req, reply) => sendPage(reply, await importPage(pageContext(req), emptyForm())));
  for (const url of [`${BASE}/import`, `${BASE}/import/preview`, `${BASE}/import/apply`]) {
    registerFormPage(app, 'POST', url, async (req, ctx, form) => {
      // An import refused as a whole (an invalid entry) shows the per-entry preview, so every problem is listed.
      const payload = (req.body as { policy_payload?: unknown } | null)?.policy_payload;
      let outcome: ImportOutcome | undefined;
      if (url.endsWith('/apply') && typeof payload === 'string' && form.errors.policy_payload !== undefined) {
        const answer = await callApi(app, req, 'POST', '/api/policies/import/preview', { document: payload });
        if (answer.status === 200) outcome = { kind: 'preview', result: answer.json as ImportPlan };
      }
      return importPage(ctx, form, outcome);
    });
  }

  const dryRunPage = async (ctx: PageContext, form: FormState, result?: DryRunResult) => {
    demand(ctx, 'policies:read');
    const [identities, sources] = await Promise.all([listIdentities(db), listDataSources(db)]);
    return (
      <Layout ctx={ctx} title="Policy dry run" crumbs={crumbs({ label: 'Dry run' })}>
        <p>Decides a described request against the source roles and the policy set in force. Nothing is stored or sent.</p>
        <ConsoleForm ctx={ctx} form={form} action={`${BASE}/dry-run`} submit="Dry run">
          <SelectField form={form} name="identity_id" label="Identity" required options={[['', 'Choose an identity'] as const, ...identities.map((i) => [String(i.id), `${i.name} (#${i.id})`] as const)]} />
          <SelectField form={form} name="source_id" label="Source" required options={[['', 'Choose a source'] as const, ...sources.map((s) => [s.source_id, `${s.name} (${s.source_id})`] as const)]} />
          <TextAreaField form={form} name="sql" label="SQL" rows={4} code hint="For a SQL source: the statement (its operation, tables and columns are read from it). Leave empty for an HTTP request." />
          <SelectField form={form} name="method" label="HTTP method" options={[['', '—'] as const, ...HTTP_METHODS.map((m) => [m, m] as const)]} />
          <Field form={form} name="path" label="HTTP path" hint="With the method, e.g. /v1/customers/1." />
          <SelectField form={form} name="operation" label="Operation" value="read" hint="Used when neither SQL nor a method says what the request is." options={OPERATIONS.map((o) => [o, o] as const)} />
          <Field form={form} name="tables" label="Tables" hint="Comma-separated, added to those of the SQL." />
          <Field form={form} name="columns" label="Columns" hint="Comma-separated." />
          <Field form={form} name="classification_tags" label="Classification tags" hint="Comma-separated." />
        </ConsoleForm>
        {result ? <DryRunResultView result={result} /> : ''}
      </Layout>
    );
  };
  api.describe({ method: 'GET', url: `${BASE}/dry-run`, summary: 'The policy dry-run form', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/dry-run`, async (req, reply) => sendPage(reply, await dryRunPage(pageContext(req), emptyForm({ operation: 'read' }))));
  registerFormPage(app, 'POST', `${BASE}/dry-run`, (_req, ctx, form) => dryRunPage(ctx, form));

  // ---- one policy: details, the form-built update, JSON editing, enable/disable, delete

  const load = async (id: number): Promise<Policy> => {
    const p = await getPolicyById(db, id);
    if (!p) throw new GatehouseError('not_found', 'There is no such policy.');
    return p;
  };

  const detailPage = async (ctx: PageContext, id: number, forms: { edit?: FormState; json?: FormState } = {}) => {
    demand(ctx, 'policies:read');
    const p = await load(id);
    const canWrite = ctx.can('policies:write');
    const edit = forms.edit ?? emptyForm(formValuesOf(p));
    const json = forms.json ?? emptyForm({ name: p.name, priority: String(p.priority), enabled: p.enabled ? 'on' : '', conditions: JSON.stringify(p.conditions, null, 2), actions: JSON.stringify(p.actions, null, 2) });
    return (
      <Layout ctx={ctx} title={`Policy ${p.name}`} crumbs={crumbs({ label: p.name })}>
        <dl class="props">
          <dt>Id</dt>
          <dd>{p.id}</dd>
          <dt>State</dt>
          <dd>
            <EnabledBadge enabled={p.enabled} />
          </dd>
          <dt>Priority</dt>
          <dd>{p.priority}</dd>
          <dt>Conditions</dt>
          <dd>
            <pre safe>{JSON.stringify(p.conditions, null, 2)}</pre>
          </dd>
          <dt>Actions</dt>
          <dd>
            <pre safe>{JSON.stringify(p.actions, null, 2)}</pre>
          </dd>
          <dt>Created</dt>
          <dd>
            <Time value={p.created_at} />
          </dd>
          <dt>Updated</dt>
          <dd>
            <Time value={p.updated_at} />
          </dd>
        </dl>
        {canWrite ? (
          <>
            <div class="form-actions">
              <PostButton ctx={ctx} action={`${BASE}/${p.id}/enabled`} fields={{ enabled: p.enabled ? 'false' : 'true' }} label={p.enabled ? 'Disable' : 'Enable'} variant={p.enabled ? 'danger' : undefined} />
              <PostButton ctx={ctx} action={`${BASE}/${p.id}/delete`} label="Delete" variant="danger" />
            </div>
            <h2>Edit with the form</h2>
            {formKeeps(p) ? (
              ''
            ) : (
              <p class="notice">The form cannot keep this policy exactly (it would schema-qualify unqualified table names or change other values). Edit it as JSON below.</p>
            )}
            <PolicyForm ctx={ctx} form={edit} action={`${BASE}/${p.id}/update`} submit="Save changes" />
            <h2>Edit as JSON</h2>
            <ConsoleForm ctx={ctx} form={json} action={`${BASE}/${p.id}/json`} submit="Save JSON">
              <Field form={json} name="name" label="Name" required maxlength={255} />
              <Field form={json} name="priority" label="Priority" type="number" />
              <CheckboxField form={json} name="enabled" label="Enabled" />
              <TextAreaField form={json} name="conditions" label="Conditions (JSON object)" rows={8} code required />
              <TextAreaField form={json} name="actions" label="Actions (JSON object)" rows={6} code required />
            </ConsoleForm>
          </>
        ) : (
          ''
        )}
      </Layout>
    );
  };

  const idOf = (req: FastifyRequest, key = 'id') => pageId((req.params as Record<string, string>)[key]);

  api.describe({ method: 'GET', url: `${BASE}/:id`, summary: 'One policy: details, form and JSON editing', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/:id`, async (req, reply) => sendPage(reply, await detailPage(pageContext(req), idOf(req))));
  registerFormPage(app, 'POST', `${BASE}/:policy_id/update`, (req, ctx, form) => detailPage(ctx, idOf(req, 'policy_id'), { edit: form }));

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/json`,
    summary: 'Replace a policy from its JSON (form: name, priority, enabled, conditions, actions); problems shown at the field',
    permission: 'policies:write',
    schema: jsonEditForm,
    render: (req, ctx, form) => detailPage(ctx, idOf(req), { json: form }),
    handle: async ({ req, reply, body }) => {
      const id = idOf(req);
      const items: ValidationErrorItem[] = [];
      const conditions = jsonObjectField(body.conditions, 'conditions', items);
      const actions = jsonObjectField(body.actions, 'actions', items);
      if (items.length > 0) throw validationError(items);
      const answer = await callApi(app, req, 'PATCH', `/api/policies/${id}`, { name: body.name, priority: body.priority, enabled: body.enabled, conditions, actions });
      if (answer.status === 422 && Array.isArray(answer.json?.detail)) throw validationError(itemsAtTextareas(answer.json.detail as ValidationErrorItem[]));
      if (answer.status === 404) throw new GatehouseError('not_found', 'There is no such policy.');
      if (answer.status === 409) throw new GatehouseError('conflict', String(answer.json?.detail ?? 'The change was refused.'));
      if (answer.status !== 200) throw new GatehouseError(answer.status === 403 ? 'forbidden' : 'internal', String(answer.json?.detail ?? 'The change failed.'));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/enabled`,
    summary: 'Enable or disable a policy (form: enabled true|false)',
    permission: 'policies:write',
    schema: z.object({ enabled: z.enum(['true', 'false']) }),
    render: (req, ctx) => detailPage(ctx, idOf(req)),
    handle: async ({ req, reply, body }) => {
      const id = idOf(req);
      const answer = await callApi(app, req, 'PATCH', `/api/policies/${id}`, { enabled: body.enabled === 'true' });
      if (answer.status === 404) throw new GatehouseError('not_found', 'There is no such policy.');
      if (answer.status !== 200) throw new GatehouseError('internal', String(answer.json?.detail ?? 'The change failed.'));
      return reply.redirect(`${BASE}/${id}`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${BASE}/:id/delete`,
    summary: 'Delete a policy',
    permission: 'policies:write',
    schema: z.object({}),
    render: (req, ctx) => detailPage(ctx, idOf(req)),
    handle: async ({ req, reply }) => {
      const answer = await callApi(app, req, 'DELETE', `/api/policies/${idOf(req)}`);
      if (answer.status === 404) throw new GatehouseError('not_found', 'There is no such policy.');
      if (answer.status !== 204) throw new GatehouseError('internal', String(answer.json?.detail ?? 'The deletion failed.'));
      return reply.redirect(BASE, 303);
    },
  });

  return {
    saved: (reply, id) => reply.redirect(`${BASE}/${id}`, 303),
    imported: async (req, reply, outcome) => {
      const ctx = pageContext(req);
      const payload = (req.body as { policy_payload?: unknown } | null)?.policy_payload;
      return sendPage(reply, await importPage(ctx, emptyForm({ policy_payload: typeof payload === 'string' ? payload : '' }), outcome));
    },
    dryRan: async (req, reply, result) => sendPage(reply, await dryRunPage(pageContext(req), emptyForm(keptValues(req.body)), result)),
  };
}
