// The catalog's console pages (docs/catalog.md, spec §4 "Admin: console form endpoints"): a source's catalog tree with search, its drift changes with acknowledge one/all, annotations with suggestions, scan history; and the naming report.
import { z } from 'zod';
import type { FastifyRequest } from 'fastify';
import type { AdminModuleContext } from '../admin/module.js';
import { demand, pageContext, sendPage, type PageContext } from '../admin/console/context.js';
import { ConsoleForm, emptyForm, Field, optionalText, registerConsoleForm, requiredText, type FormState } from '../admin/console/forms.js';
import { Layout } from '../admin/console/layout.js';
import { Empty, PostButton, Time, seg } from '../admin/console/ui.js';
import { DataTable } from '../admin/console/data-table.js';
import { GatehouseError } from '../errors/registry.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import { driftProtectionOf, latestSnapshot, latestStructure, listAnnotations, listChanges, listSnapshots, type StoredChange } from '../store/repos/catalog.js';
import type { CatalogStructure } from './model.js';
import { treeOf } from './tree.js';
import { namingReport } from './naming-service.js';
import type { CatalogActions } from './routes.js';

const SOURCES = '/dashboard/data-sources';
/** Most relations one page renders; a search narrows a larger catalog. */
export const PAGE_RELATIONS = 200;
/** Most acknowledged changes listed under the open ones. */
const ACKNOWLEDGED_SHOWN = 50;

const catalogUrl = (sourceId: string) => `${SOURCES}/${seg(sourceId)}/catalog`;

/** Spec §2 "Catalog acknowledge (form)": change_id, empty = every open change. */
export const ackFormSchema = z.object({ change_id: optionalText(64).pipe(z.string().regex(/^[0-9a-f]*$/, 'must be a change_id (hexadecimal)')) });
/** Spec §2 "Catalog annotate (form)": path required, classification empty = remove. */
export const annotateFormSchema = z.object({ path: requiredText(1024), classification: optionalText(128) });
const scanFormSchema = z.object({});

interface Forms {
  ack?: FormState;
  annotate?: FormState;
  /** A message for the page (a scan request, a refusal). */
  notice?: string;
}

function sourceIdOf(req: FastifyRequest): string {
  return (req.params as { source_id?: string }).source_id ?? '';
}

function queryOf(req: FastifyRequest): string {
  const q = (req.query as { q?: unknown } | undefined)?.q;
  return typeof q === 'string' ? q.slice(0, 256) : '';
}

function ChangeLabel({ c }: { c: Pick<StoredChange, 'kind' | 'object_type' | 'detail'> }): JSX.Element {
  const d = c.detail as Record<string, unknown>;
  const extra = c.kind === 'type_changed' ? ` (${String(d.before)} → ${String(d.after)})` : '';
  return <span safe>{`${c.kind} ${c.object_type}${extra}`}</span>;
}

function SnapshotState({ s }: { s: { status: string; truncated_by: string | null; error: string | null } }): JSX.Element {
  if (s.status === 'failed') {
    return (
      <span>
        <span class="badge bad">failed</span> <span safe>{s.error ?? ''}</span>
      </span>
    );
  }
  return s.truncated_by ? (
    <span class="badge warn" safe>
      {`truncated by ${s.truncated_by}`}
    </span>
  ) : (
    <span class="badge ok">complete</span>
  );
}

async function catalogPage(services: AdminModuleContext['services'], ctx: PageContext, sourceId: string, q: string, forms: Forms = {}): Promise<JSX.Element> {
  const db = services.db;
  const source = await getDataSourceBySourceId(db, sourceId);
  if (!source) throw new GatehouseError('not_found', 'There is no such data source.');
  const [latest, last, annotations, open, acknowledged, history, drift] = await Promise.all([
    latestStructure(db, sourceId),
    latestSnapshot(db, sourceId),
    listAnnotations(db, sourceId),
    listChanges(db, sourceId, { open: true }),
    listChanges(db, sourceId, { open: false, limit: ACKNOWLEDGED_SHOWN }),
    listSnapshots(db, sourceId),
    driftProtectionOf(db, sourceId),
  ]);
  const tree = latest === undefined ? null : treeOf(latest.structure as unknown as CatalogStructure, annotations, open, q === '' ? null : q);
  const canWrite = ctx.can('catalog:write');
  const base = catalogUrl(sourceId);
  const ack = forms.ack ?? emptyForm();
  const annotate = forms.annotate ?? emptyForm();
  const shown = tree?.relations.slice(0, PAGE_RELATIONS) ?? [];
  const suggestions = tree === null ? [] : tree.relations.flatMap((r) => r.columns.filter((c) => c.classification === null && c.suggested_classification !== null).map((c) => ({ path: c.path, tag: c.suggested_classification! })));
  const opSuggestions = tree === null ? [] : tree.operations.flatMap((o) => o.response_properties.filter((p) => p.classification === null && p.suggested_classification !== null).map((p) => ({ path: p.path, tag: p.suggested_classification! })));
  const allSuggestions = [...suggestions, ...opSuggestions];
  const actions = canWrite ? <PostButton ctx={ctx} action={`${base}/scan`} label="Scan now" /> : <></>;
  return (
    <Layout ctx={ctx} title={`Catalog of ${source.name}`} crumbs={[{ label: 'Data sources', href: SOURCES }, { label: source.name, href: `${SOURCES}/${seg(sourceId)}` }, { label: 'Catalog' }]} actions={actions}>
      {forms.notice ? (
        <p class="notice" role="status" safe>
          {forms.notice}
        </p>
      ) : (
        ''
      )}
      <dl class="props">
        <dt>Source id</dt>
        <dd>
          <code safe>{sourceId}</code>
        </dd>
        <dt>Served snapshot</dt>
        <dd safe>{latest ? `version ${latest.version}, ${latest.node_count} nodes, captured ${latest.finished_at.toISOString()}` : 'no catalog captured yet'}</dd>
        <dt>Last scan</dt>
        <dd>{last ? <SnapshotState s={last} /> : <span>none yet</span>}</dd>
        <dt>Open changes</dt>
        <dd safe>{String(open.length)}</dd>
        <dt>Drift protection</dt>
        <dd>{drift ? <span class="badge ok">on</span> : <span class="badge warn">off</span>}</dd>
      </dl>

      <section aria-labelledby="tree">
        <h2 id="tree">Structure</h2>
        <form method="get" action={base} class="inline-form" role="search">
          <label for="catalog-q">Search relations and columns</label> <input id="catalog-q" name="q" type="search" value={q} maxlength={256} />{' '}
          <button type="submit" class="button small secondary">
            Search
          </button>
        </form>
        {tree === null ? (
          <Empty>No catalog captured yet: the worker scans the source on save, on its schedule, or when asked.</Empty>
        ) : (
          <>
            {tree.truncated_by ? (
              <p class="notice" safe>
                {`The scan stopped at the cap ${tree.truncated_by}: what it did not reach is kept from the previous scan or unknown.`}
              </p>
            ) : (
              ''
            )}
            {tree.relations.length > shown.length ? <p class="notice" safe>{`Showing ${shown.length} of ${tree.relations.length} relations; search to narrow.`}</p> : ''}
            {shown.length === 0 && tree.operations.length === 0 ? <Empty>Nothing matches.</Empty> : ''}
            {shown.map((r) => (
              <details open={shown.length <= 20}>
                <summary>
                  <code safe>{r.path}</code> <span class="muted" safe>{r.kind + (r.partition_of ? `, partition of ${r.partition_of}` : '') + (r.complete ? '' : ', columns cut by a cap')}</span>
                </summary>
                <div class="table-wrap">
                  <table class="responsive">
                    <caption class="sr-only" safe>{`Columns of ${r.path}`}</caption>
                    <thead>
                      <tr>
                        <th scope="col">Column</th>
                        <th scope="col">Type</th>
                        <th scope="col">Null</th>
                        <th scope="col">Classification</th>
                        <th scope="col">Suggested</th>
                        <th scope="col">Drift</th>
                      </tr>
                    </thead>
                    <tbody>
                      {r.columns.map((c) => (
                        <tr>
                          <td data-label="Column">
                            <code safe>{c.name}</code>
                          </td>
                          <td data-label="Type" safe>
                            {c.type}
                          </td>
                          <td data-label="Null">{c.nullable ? 'yes' : 'no'}</td>
                          <td data-label="Classification" safe>
                            {c.classification ?? '—'}
                          </td>
                          <td data-label="Suggested" safe>
                            {c.classification === null ? (c.suggested_classification ?? '—') : '—'}
                          </td>
                          <td data-label="Drift">{c.open_change_id ? <span class={c.protected ? 'badge bad' : 'badge warn'}>{c.protected ? 'new, redacted' : 'new'}</span> : ''}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              </details>
            ))}
            {tree.operations.length > 0 ? (
              <div class="table-wrap">
                <table class="responsive">
                  <caption class="sr-only">OpenAPI operations</caption>
                  <thead>
                    <tr>
                      <th scope="col">Operation</th>
                      <th scope="col">Parameters</th>
                      <th scope="col">Response properties</th>
                    </tr>
                  </thead>
                  <tbody>
                    {tree.operations.slice(0, PAGE_RELATIONS).map((o) => (
                      <tr>
                        <td data-label="Operation">
                          <code safe>{`${o.method} ${o.path}`}</code>
                        </td>
                        <td data-label="Parameters" safe>
                          {o.parameters.join(', ') || '—'}
                        </td>
                        <td data-label="Response properties" safe>
                          {o.response_properties.map((p) => (p.classification ? `${p.name} [${p.classification}]` : p.name)).join(', ') || '—'}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            ) : (
              ''
            )}
          </>
        )}
      </section>

      <section aria-labelledby="changes">
        <h2 id="changes">Changes</h2>
        <DataTable
          rows={open}
          empty="No open changes."
          caption="Open changes"
          columns={[
            { label: 'Path', cell: (c) => <code safe>{c.path}</code> },
            { label: 'Change', cell: (c) => <ChangeLabel c={c} /> },
            { label: 'Protected', cell: (c) => (c.protected ? <span class="badge bad">redacted until acknowledged</span> : 'no') },
            { label: 'Found', cell: (c) => <Time value={c.created_at} /> },
            { label: 'Acknowledge', show: canWrite, cell: (c) => <PostButton ctx={ctx} action={`${base}/changes/acknowledge`} fields={{ change_id: c.change_id }} label="Acknowledge" variant="secondary" /> },
          ]}
        />
        {canWrite ? (
          <ConsoleForm ctx={ctx} form={ack} action={`${base}/changes/acknowledge`} submit={open.length > 0 ? 'Acknowledge' : 'Acknowledge all'}>
            <Field form={ack} name="change_id" label="Change id" maxlength={64} hint="Empty acknowledges every open change." />
          </ConsoleForm>
        ) : (
          ''
        )}
        {acknowledged.length > 0 ? (
          <details>
            <summary safe>{`Acknowledged (latest ${acknowledged.length})`}</summary>
            <ul>
              {acknowledged.map((c) => (
                <li>
                  <code safe>{c.path}</code> <ChangeLabel c={c} /> — <span safe>{`by ${c.acknowledged_by ?? '?'}`}</span> <Time value={c.acknowledged_at} />
                </li>
              ))}
            </ul>
          </details>
        ) : (
          ''
        )}
      </section>

      <section aria-labelledby="annotations">
        <h2 id="annotations">Annotations</h2>
        <DataTable
          rows={annotations}
          empty="No confirmed classifications."
          caption="Confirmed classifications"
          columns={[
            { label: 'Path', cell: (a) => <code safe>{a.path}</code> },
            { label: 'Classification', text: (a) => a.classification },
            {
              label: 'By',
              cell: (a) => (
                <>
                  <span safe>{a.updated_by}</span> <Time value={a.updated_at} />
                </>
              ),
            },
            { label: 'Remove', show: canWrite, cell: (a) => <PostButton ctx={ctx} action={`${base}/annotations`} fields={{ path: a.path, classification: '' }} label="Remove" variant="danger" /> },
          ]}
        />
        {allSuggestions.length > 0 ? (
          <>
            <h3>Suggestions</h3>
            <p>Suggested from the column's name and type; they do not feed governance until confirmed.</p>
            <ul class="suggestions">
              {allSuggestions.slice(0, PAGE_RELATIONS).map((s) => (
                <li>
                  <code safe>{s.path}</code> → <span safe>{s.tag}</span>{' '}
                  {canWrite ? <PostButton ctx={ctx} action={`${base}/annotations`} fields={{ path: s.path, classification: s.tag }} label="Confirm" variant="secondary" /> : ''}
                </li>
              ))}
            </ul>
          </>
        ) : (
          ''
        )}
        {canWrite ? (
          <>
            <h3>Classify a column</h3>
            <ConsoleForm ctx={ctx} form={annotate} action={`${base}/annotations`} submit="Save classification">
              <Field form={annotate} name="path" label="Path" required maxlength={1024} hint='schema.table.column (quote names with capitals or dots: public."Users".email), or METHOD /path#property' />
              <Field form={annotate} name="classification" label="Classification" maxlength={128} hint="A tag such as email or ssn; empty removes the classification." />
            </ConsoleForm>
          </>
        ) : (
          ''
        )}
      </section>

      <section aria-labelledby="history">
        <h2 id="history">Scan history</h2>
        {history.length === 0 ? (
          <Empty>Never scanned.</Empty>
        ) : (
          <div class="table-wrap">
            <table class="responsive">
              <caption class="sr-only">Scans, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Version</th>
                  <th scope="col">Started</th>
                  <th scope="col">Trigger</th>
                  <th scope="col">Worker</th>
                  <th scope="col">Result</th>
                  <th scope="col">Nodes</th>
                  <th scope="col">Changes</th>
                </tr>
              </thead>
              <tbody>
                {history.map((s) => (
                  <tr>
                    <td data-label="Version" safe>
                      {String(s.version)}
                    </td>
                    <td data-label="Started">
                      <Time value={s.started_at} />
                    </td>
                    <td data-label="Trigger" safe>
                      {s.trigger}
                    </td>
                    <td data-label="Worker" safe>
                      {s.worker_id}
                    </td>
                    <td data-label="Result">
                      <SnapshotState s={s} />
                    </td>
                    <td data-label="Nodes" safe>
                      {String(s.node_count)}
                    </td>
                    <td data-label="Changes" safe>
                      {String(s.change_count)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </Layout>
  );
}

function ownerLabel(f: Awaited<ReturnType<typeof namingReport>>['findings'][number]): { text: string; href: string } {
  return f.owner.kind === 'policy'
    ? { text: `policy ${f.owner.policy_name} (#${f.owner.policy_id})`, href: `/api/policies/${f.owner.policy_id}` }
    : { text: `role ${f.owner.role_key}, rule ${f.owner.rule_index + 1}`, href: `${SOURCES}/${seg(f.source_id)}` };
}

export function registerCatalogPages({ app, api, services }: AdminModuleContext, actions: CatalogActions): void {
  api.describe({ method: 'GET', url: `${SOURCES}/:source_id/catalog`, summary: "A source's catalog: structure with search (q), open changes, annotations with suggestions, scan history", tags: ['catalog', 'console'], produces: ['text/html'] });
  app.get(`${SOURCES}/:source_id/catalog`, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'catalog:read');
    return sendPage(reply, await catalogPage(services, ctx, sourceIdOf(req), queryOf(req)));
  });

  registerConsoleForm(app, api, {
    url: `${SOURCES}/:source_id/catalog/changes/acknowledge`,
    summary: 'Acknowledge one change (change_id) or every open change (empty); 303 back to the catalog page',
    permission: 'catalog:write',
    schema: ackFormSchema,
    render: (req, ctx, form) => catalogPage(services, ctx, sourceIdOf(req), '', { ack: form }),
    handle: async ({ req, reply, body }) => {
      const sourceId = sourceIdOf(req);
      await actions.acknowledge(req, sourceId, body.change_id === '' ? null : body.change_id);
      return reply.redirect(`${catalogUrl(sourceId)}#changes`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${SOURCES}/:source_id/catalog/annotations`,
    summary: 'Classify a path (schema.table.column or METHOD /path#property); an empty classification removes it; 303 back to the catalog page',
    permission: 'catalog:write',
    schema: annotateFormSchema,
    render: (req, ctx, form) => catalogPage(services, ctx, sourceIdOf(req), '', { annotate: form }),
    handle: async ({ req, reply, body }) => {
      const sourceId = sourceIdOf(req);
      await actions.annotate(req, sourceId, body.path, body.classification);
      return reply.redirect(`${catalogUrl(sourceId)}#annotations`, 303);
    },
  });

  registerConsoleForm(app, api, {
    url: `${SOURCES}/:source_id/catalog/scan`,
    summary: 'Ask the workers to scan the source now (form: the CSRF field only); the catalog page with the request noted',
    permission: 'catalog:write',
    schema: scanFormSchema,
    render: (req, ctx, form) => catalogPage(services, ctx, sourceIdOf(req), '', { notice: form.message }),
    handle: async ({ req, ctx }) => {
      const sourceId = sourceIdOf(req);
      const at = await actions.requestScan(req, sourceId);
      return catalogPage(services, ctx, sourceId, '', { notice: `Scan requested at ${at.toISOString()}; the next worker check takes it (reload to see it in the history).` });
    },
  });

  api.describe({ method: 'GET', url: '/dashboard/catalog/naming-report', summary: 'The naming report: role rules and deny/redact policies whose names resolve ambiguously, not at all, or differently since the last scan', tags: ['catalog', 'console'], produces: ['text/html'] });
  app.get('/dashboard/catalog/naming-report', async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'catalog:read');
    const report = await namingReport(services.db);
    return sendPage(
      reply,
      <Layout ctx={ctx} title="Naming report" crumbs={[{ label: 'Naming report' }]}>
        <p>
          Every table and column name of enabled source-role rules and deny or redacting policies, checked against each PostgreSQL source's latest catalog. Generated <Time value={report.generated_at} />.
        </p>
        <h2>Sources</h2>
        {report.sources.length === 0 ? (
          <Empty>No PostgreSQL sources.</Empty>
        ) : (
          <ul>
            {report.sources.map((s) => (
              <li>
                <a href={catalogUrl(s.source_id)} safe>
                  {s.source_id}
                </a>{' '}
                <span safe>{s.snapshot_version === null ? '— no catalog yet, no findings' : `— snapshot ${s.snapshot_version}${s.truncated_by ? `, truncated by ${s.truncated_by} (names may look unresolved)` : ''}`}</span>
              </li>
            ))}
          </ul>
        )}
        <h2>Findings</h2>
        {report.findings.length === 0 ? (
          <Empty>No findings: every name resolves as written.</Empty>
        ) : (
          <div class="table-wrap">
            <table class="responsive">
              <caption class="sr-only">Naming findings</caption>
              <thead>
                <tr>
                  <th scope="col">Source</th>
                  <th scope="col">Rule</th>
                  <th scope="col">Field</th>
                  <th scope="col">Name</th>
                  <th scope="col">Finding</th>
                  <th scope="col">Objects</th>
                </tr>
              </thead>
              <tbody>
                {report.findings.map((f) => {
                  const owner = ownerLabel(f);
                  return (
                    <tr>
                      <td data-label="Source" safe>
                        {f.source_id}
                      </td>
                      <td data-label="Rule">
                        <a href={owner.href} safe>
                          {owner.text}
                        </a>
                      </td>
                      <td data-label="Field" safe>
                        {f.field}
                      </td>
                      <td data-label="Name">
                        <code safe>{f.name}</code>
                      </td>
                      <td data-label="Finding">
                        <span class="badge warn" safe>
                          {f.kind}
                        </span>{' '}
                        <span safe>{f.detail}</span>
                      </td>
                      <td data-label="Objects" safe>
                        {f.resolved.join(', ') || '—'}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </Layout>,
    );
  });
}

