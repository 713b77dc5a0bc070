// The console audit explorer under /dashboard/audit: the audit search's filters as a form, newest-first keyset pages, one entry with its decision trace, and the current filter exported as CSV or NDJSON.
import type { FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { AUDIT_CHANNELS, AUDIT_DECISIONS, type AuditEntry } from '../../audit/entry.js';
import { auditExportQuery, auditSearchQuery, sendAuditExport } from '../../audit/routes.js';
import type { AuditDatabase } from '../../audit/schema.js';
import { decodeCursor, getAuditEntry, InvalidCursorError, searchAudit, type AuditFilters, type AuditPage } from '../../audit/search.js';
import { GatehouseError } from '../../errors/registry.js';
import { validationItems, type ValidationErrorItem } from '../../http/validation.js';
import { auditReadStore } from '../api/audit.js';
import type { AdminModuleContext } from '../module.js';
import { demand, pageContext, sendPage, type PageContext } from './context.js';
import { Field, SelectField, formStateFrom, type FormState } from './forms.js';
import { Layout } from './layout.js';
import { DataTable } from './data-table.js';
import { Time, seg } from './ui.js';

export const AUDIT_PAGE = '/dashboard/audit';
/** Entries per page unless the address says otherwise (`limit`, up to the search's maximum). */
const PAGE_SIZE = 50;
/** The filter fields of the form, in the order of the audit search's query (GET /api/audit). */
const FILTER_FIELDS = ['from', 'to', 'identity_id', 'source_id', 'channel', 'decision', 'status', 'request_id', 'approval_id'] as const;

const crumbs = (...more: Array<{ label: string; href?: string }>) => [{ label: 'Audit', href: AUDIT_PAGE }, ...more];

/** The query as single strings, blanks dropped (an HTML GET form sends every field, empty ones as ''). */
function queryValues(req: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries((req.query as Record<string, unknown>) ?? {})) {
    const one = Array.isArray(v) ? v[v.length - 1] : v;
    if (typeof one === 'string' && one.trim() !== '') out[k] = one.trim();
  }
  return out;
}

/** The address of the explorer (or its export) for a set of filter values; empty values are left out. */
export function auditHref(values: Record<string, string | undefined>, base = AUDIT_PAGE): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(values)) if (v !== undefined && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `${base}?${s}` : base;
}

type Parsed = { ok: true; filters: AuditFilters; values: Record<string, string> } | { ok: false; state: FormState };

/** The page's filters through the audit search's own query schema (one set of names, bounds and messages). */
function parseFilters(values: Record<string, string>): Parsed {
  const parsed = auditSearchQuery.safeParse({ limit: String(PAGE_SIZE), ...values });
  let items: ValidationErrorItem[] = parsed.success ? [] : validationItems('query', parsed.error, values);
  if (parsed.success && parsed.data.cursor) {
    try {
      decodeCursor(parsed.data.cursor);
    } catch (err) {
      if (!(err instanceof InvalidCursorError)) throw err;
      items = [{ loc: ['query', 'cursor'], msg: 'the page position is not valid; start again from the first page', type: 'value_error' }];
    }
  }
  if (parsed.success && parsed.data.from && parsed.data.to && parsed.data.from >= parsed.data.to) {
    items = [...items, { loc: ['query', 'to'], msg: 'must be later than From', type: 'value_error' }];
  }
  if (items.length > 0 || !parsed.success) {
    // The form helpers place ["body", field] items at their fields; the cursor has none, so its message heads the form.
    const asBody = items.map((i) => (i.loc[1] === 'cursor' ? i : { ...i, loc: ['body', ...i.loc.slice(1)] }));
    return { ok: false, state: formStateFrom(values, asBody, 'Some filters need attention; see the messages beside them.') };
  }
  return { ok: true, filters: parsed.data as AuditFilters, values };
}

const any = (values: readonly string[]) => [['', 'any'] as const, ...values.map((v) => [v, v] as const)];

function FilterForm({ form }: { form: FormState }): JSX.Element {
  return (
    <form method="get" action={AUDIT_PAGE} class="console-form filters" aria-label="Audit filters">
      {form.message ? (
        <p class="form-error" role="alert" safe>
          {form.message}
        </p>
      ) : (
        ''
      )}
      <Field form={form} name="from" label="From" placeholder="2026-11-25T09:00:00Z" hint="ISO 8601; UTC when no offset" maxlength={40} />
      <Field form={form} name="to" label="To (before)" placeholder="2026-11-25T10:00:00Z" maxlength={40} />
      <Field form={form} name="identity_id" label="Identity id" maxlength={10} />
      <Field form={form} name="source_id" label="Source id" maxlength={256} />
      <SelectField form={form} name="channel" label="Channel" options={any(AUDIT_CHANNELS)} />
      <SelectField form={form} name="decision" label="Decision" options={any(AUDIT_DECISIONS)} />
      <Field form={form} name="status" label="Status" maxlength={3} hint="e.g. 202, 403, 502" />
      <Field form={form} name="request_id" label="Request id" maxlength={256} />
      <Field form={form} name="approval_id" label="Approval id" maxlength={10} />
      <div class="form-actions">
        <button type="submit" class="button small">
          Search
        </button>
        <a class="button small secondary" href={AUDIT_PAGE}>
          Clear
        </a>
      </div>
    </form>
  );
}

function DecisionBadge({ decision }: { decision: string }): JSX.Element {
  const cls = decision === 'allow' ? 'badge ok' : decision === 'require_approval' ? 'badge warn' : 'badge bad';
  return (
    <span class={cls} safe>
      {decision}
    </span>
  );
}

/** What was asked, in one line: the HTTP method and path, the normalized SQL, or the admin action. */
export function requestSummary(e: Pick<AuditEntry, 'method' | 'path' | 'sql_normalized' | 'action' | 'operation'>): string {
  const text = e.sql_normalized ?? (e.method || e.path ? `${e.method ?? ''} ${e.path ?? ''}`.trim() : (e.action ?? e.operation ?? ''));
  return text.length > 140 ? `${text.slice(0, 140)}…` : text;
}

function IdentityCell({ id, names }: { id: number | null; names: Map<number, string> }): JSX.Element {
  if (id === null) return <span class="muted">—</span>;
  const name = names.get(id);
  return (
    <a href={`/dashboard/access-control/identities/${id}`}>
      #{id}
      {name !== undefined ? <span safe>{` ${name}`}</span> : ''}
    </a>
  );
}

async function identityNames(services: AdminModuleContext['services'], ids: Array<number | null>): Promise<Map<number, string>> {
  const wanted = [...new Set(ids.filter((i): i is number => i !== null))];
  if (wanted.length === 0) return new Map();
  const rows = await services.db.selectFrom('identities').select(['id', 'name']).where('id', 'in', wanted).execute();
  return new Map(rows.map((r) => [r.id, r.name]));
}

function ResultTable({ page, names }: { page: AuditPage; names: Map<number, string> }): JSX.Element {
  return (
    <DataTable
      rows={page.items}
      caption="Audit entries, newest first"
      empty="No audit entries match these filters."
      columns={[
        { label: 'Time', cell: (e) => <Time value={e.ts} /> },
        { label: 'Channel', text: (e) => e.channel },
        { label: 'Identity', cell: (e) => <IdentityCell id={e.identity_id} names={names} /> },
        { label: 'Source', cell: (e) => <code safe>{e.source_id ?? ''}</code> },
        { label: 'Request', cell: (e) => <code safe>{requestSummary(e)}</code> },
        { label: 'Decision', cell: (e) => <DecisionBadge decision={e.decision} /> },
        { label: 'Status', text: (e) => e.status },
        { label: 'ms', text: (e) => Math.round(e.duration_ms) },
        {
          label: 'Entry',
          cell: (e) => (
            <a href={`${AUDIT_PAGE}/${seg(e.id)}`} aria-label={`View entry ${e.id}`}>
              View
            </a>
          ),
        },
      ]}
    />
  );
}

/** The decision trace of one entry as a table: each reason in the order recorded, then the policies that applied. */
function DecisionTrace({ e }: { e: AuditEntry }): JSX.Element {
  return (
    <div class="table-wrap">
      <table>
        <caption class="visually-hidden">Decision trace</caption>
        <thead>
          <tr>
            <th scope="col">Step</th>
            <th scope="col">What decided</th>
          </tr>
        </thead>
        <tbody>
          {e.reasons.map((r, i) => (
            <tr>
              <td>{i + 1}</td>
              <td safe>{r}</td>
            </tr>
          ))}
          {e.policy_ids.map((id) => (
            <tr>
              <td>policy</td>
              <td>
                <a href={`/dashboard/policies/${id}`}>Policy #{id}</a> applied
              </td>
            </tr>
          ))}
          <tr>
            <td>outcome</td>
            <td>
              <DecisionBadge decision={e.decision} /> <span safe>{` status ${e.status}${e.upstream_status !== null ? `, upstream ${e.upstream_status}` : ''}${e.error_code ? `, error ${e.error_code}` : ''}`}</span>
            </td>
          </tr>
        </tbody>
      </table>
    </div>
  );
}

function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

function EntryDetail({ e, names }: { e: AuditEntry; names: Map<number, string> }): JSX.Element {
  return (
    <>
      <dl class="props">
        <dt>Time</dt>
        <dd>
          <Time value={e.ts} />
        </dd>
        <dt>Entry id</dt>
        <dd>
          <code safe>{e.id}</code>
        </dd>
        <dt>Request id</dt>
        <dd>
          <a href={auditHref({ request_id: e.request_id })}>
            <code safe>{e.request_id}</code>
          </a>
        </dd>
        <dt>Channel</dt>
        <dd safe>{e.channel}</dd>
        <dt>Identity</dt>
        <dd>
          <IdentityCell id={e.identity_id} names={names} />
        </dd>
        <dt>Admin</dt>
        <dd safe>{e.admin_user_id === null ? '—' : `#${e.admin_user_id}`}</dd>
        <dt>Source</dt>
        <dd>
          <code safe>{e.source_id ?? '—'}</code>
        </dd>
        <dt>Operation</dt>
        <dd safe>{e.operation ?? e.action ?? '—'}</dd>
        <dt>HTTP</dt>
        <dd>
          <code safe>{e.method || e.path ? `${e.method ?? ''} ${e.path ?? ''}` : '—'}</code>
        </dd>
        <dt>Tables</dt>
        <dd safe>{e.tables.length > 0 ? e.tables.join(', ') : '—'}</dd>
        <dt>Approval</dt>
        <dd>{e.approval_id === null ? <span class="muted">—</span> : <a href={`/dashboard/approvals/${e.approval_id}`}>#{e.approval_id}</a>}</dd>
        <dt>Cache</dt>
        <dd safe>{e.cache ?? '—'}</dd>
        <dt>Redactions</dt>
        <dd>{e.redactions}</dd>
        <dt>Bytes in / out</dt>
        <dd>
          {e.bytes_in} / {e.bytes_out}
        </dd>
        <dt>Duration</dt>
        <dd>{e.duration_ms} ms</dd>
        <dt>Client address</dt>
        <dd safe>{e.client_ip ?? '—'}</dd>
      </dl>
      <h2>Decision trace</h2>
      <DecisionTrace e={e} />
      {e.sql_normalized !== null ? (
        <>
          <h2>Statement (literals replaced)</h2>
          <pre safe>{e.sql_normalized}</pre>
          <p class="muted" safe>{`Fingerprint ${e.sql_fingerprint ?? '—'}`}</p>
        </>
      ) : (
        ''
      )}
      {e.target !== null || e.changes !== null ? (
        <>
          <h2>Admin change</h2>
          <pre safe>{json({ action: e.action, target: e.target, changes: e.changes })}</pre>
        </>
      ) : (
        ''
      )}
    </>
  );
}

export function registerAuditPages({ app, api, services }: AdminModuleContext): void {
  let store: Promise<Kysely<AuditDatabase>> | null = null;
  const db = (): Promise<Kysely<AuditDatabase>> => (store ??= auditReadStore(services));

  api.describe({ method: 'GET', url: AUDIT_PAGE, summary: 'Audit explorer: the audit search filters, newest-first keyset pages, export links', tags: ['console'], produces: ['text/html'], query: auditSearchQuery });
  app.get(AUDIT_PAGE, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'audit:read');
    const values = queryValues(req);
    const parsed = parseFilters(values);
    if (!parsed.ok) return sendPage(reply, explorer(ctx, parsed.state, null, new Map(), values), 422);
    const page = await searchAudit(await db(), parsed.filters);
    const names = await identityNames(services, page.items.map((e) => e.identity_id));
    return sendPage(reply, explorer(ctx, { values, errors: {} }, page, names, values));
  });

  api.describe({ method: 'GET', url: `${AUDIT_PAGE}/export`, summary: "The explorer's current filter as a CSV or NDJSON download (streamed; spreadsheet formulas neutralized)", tags: ['console'], produces: ['text/csv', 'application/x-ndjson'], query: auditExportQuery });
  app.get(`${AUDIT_PAGE}/export`, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'audit:read');
    const values = queryValues(req);
    const parsed = auditExportQuery.safeParse(values);
    if (!parsed.success) {
      const items = validationItems('query', parsed.error, values).map((i) => ({ ...i, loc: ['body', ...i.loc.slice(1)] }));
      return sendPage(reply, explorer(ctx, formStateFrom(values, items, 'The export filter is not valid.'), null, new Map(), values), 422);
    }
    const { format, ...filters } = parsed.data;
    return sendAuditExport(reply, await db(), filters as AuditFilters, format);
  });

  api.describe({ method: 'GET', url: `${AUDIT_PAGE}/:id`, summary: 'One audit entry with its decision trace', tags: ['console'], produces: ['text/html'] });
  app.get(`${AUDIT_PAGE}/:id`, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'audit:read');
    const id = (req.params as { id: string }).id;
    const entry = await getAuditEntry(await db(), id);
    if (!entry) throw new GatehouseError('not_found', 'There is no audit entry with this id.');
    const names = await identityNames(services, [entry.identity_id]);
    return sendPage(
      reply,
      <Layout ctx={ctx} title="Audit entry" crumbs={crumbs({ label: entry.id.slice(0, 8) })}>
        <EntryDetail e={entry} names={names} />
      </Layout>,
    );
  });
}

function explorer(ctx: PageContext, form: FormState, page: AuditPage | null, names: Map<number, string>, values: Record<string, string>): JSX.Element {
  const filterValues = Object.fromEntries(FILTER_FIELDS.map((f) => [f, values[f]]));
  const now = Date.now();
  const last = (ms: number) => auditHref({ ...filterValues, from: new Date(now - ms).toISOString(), to: undefined });
  return (
    <Layout ctx={ctx} title="Audit explorer" crumbs={crumbs()}>
      <nav aria-label="Time range" class="form-actions">
        <a class="button small secondary" href={last(3_600_000)}>
          Last hour
        </a>
        <a class="button small secondary" href={last(86_400_000)}>
          Last 24 hours
        </a>
        <a class="button small secondary" href={last(7 * 86_400_000)}>
          Last 7 days
        </a>
      </nav>
      <FilterForm form={form} />
      {page === null ? (
        ''
      ) : (
        <>
          <div class="form-actions">
            <a class="button small secondary" href={auditHref({ ...filterValues, format: 'csv' }, `${AUDIT_PAGE}/export`)}>
              Export CSV
            </a>
            <a class="button small secondary" href={auditHref({ ...filterValues, format: 'jsonl' }, `${AUDIT_PAGE}/export`)}>
              Export NDJSON
            </a>
          </div>
          <ResultTable page={page} names={names} />
          <nav aria-label="Pages" class="pager">
            {values.cursor ? <a href={auditHref(filterValues)}>Newest entries</a> : ''}
            {page.next_cursor ? (
              <a href={auditHref({ ...filterValues, ...(values.limit ? { limit: values.limit } : {}), cursor: page.next_cursor })} rel="next">
                Older entries →
              </a>
            ) : (
              <span class="muted">End of the matching entries.</span>
            )}
          </nav>
        </>
      )}
    </Layout>
  );
}
