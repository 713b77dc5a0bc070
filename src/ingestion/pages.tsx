// Console pages of ingestion (docs/ingestion.md "Console"): jobs with filters, progress and actions; workers with their health; a source's documents with their classification.
import { z } from 'zod';
import type { FastifyRequest } from 'fastify';
import type { AdminModuleContext } from '../admin/module.js';
import { demand, pageContext, sendPage, type PageContext } from '../admin/console/context.js';
import { Layout, CsrfField } from '../admin/console/layout.js';
import { Empty, PostButton, Time, pageId, seg } from '../admin/console/ui.js';
import { registerConsoleForm, numberText, attrValue, type FormState } from '../admin/console/forms.js';
import { GatehouseError } from '../errors/registry.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import { listDocuments } from '../store/repos/documents.js';
import { cancelJob, getJob, listJobs, retryJob, setJobPriority } from '../store/repos/ingestion-jobs.js';
import { listWorkers } from '../store/repos/workers.js';
import { INGESTION_JOB_STATUSES, type IngestionJob, type IngestionJobStatus } from '../store/schema.js';
import { ACTION_FROM, actionAllowed } from './states.js';
import { ingestionRuntimeFor } from './runtime.js';
import { applySync, listHttpAssets, walkFiles } from './sync.js';

const PAGE = 50;
const STATUS_BADGE: Record<IngestionJobStatus, string> = { pending: 'badge', running: 'badge warn', completed: 'badge ok', failed: 'badge bad', cancelled: 'badge' };

function query(req: FastifyRequest): Record<string, string> {
  const q = (req.query ?? {}) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(q).filter(([, v]) => typeof v === 'string')) as Record<string, string>;
}

function Progress({ job }: { job: IngestionJob }): JSX.Element {
  if (job.progress_total === null || job.progress_total === 0) return <span safe>{String(job.progress_current)}</span>;
  return (
    <span>
      <progress value={String(job.progress_current)} max={String(job.progress_total)} aria-label={`job ${job.id} progress`}></progress>{' '}
      <span safe>{`${job.progress_current}/${job.progress_total}`}</span>
    </span>
  );
}

function JobActions({ ctx, job }: { ctx: PageContext; job: IngestionJob }): JSX.Element {
  if (!ctx.can('jobs:write')) return <span class="muted">—</span>;
  return (
    <span>
      {actionAllowed('retry', job.status) ? <PostButton ctx={ctx} action={`/dashboard/ingestion/jobs/${seg(job.id)}/retry`} label="Retry" /> : ''}
      {actionAllowed('cancel', job.status) ? <PostButton ctx={ctx} action={`/dashboard/ingestion/jobs/${seg(job.id)}/cancel`} label="Cancel" variant="danger" /> : ''}
      {actionAllowed('priority', job.status) ? (
        <form method="post" action={`/dashboard/ingestion/jobs/${seg(job.id)}/priority`} class="inline-form">
          <CsrfField ctx={ctx} />
          <label for={`prio-${job.id}`}>Priority</label>
          <input id={`prio-${job.id}`} name="priority_score" type="number" step="any" value={attrValue(String(job.priority_score))} />
          <button type="submit" class="button small secondary">Set</button>
        </form>
      ) : (
        ''
      )}
    </span>
  );
}

async function jobsPage(ctx: PageContext, req: FastifyRequest, services: AdminModuleContext['services'], message?: string): Promise<JSX.Element> {
  const q = query(req);
  const status = (INGESTION_JOB_STATUSES as readonly string[]).includes(q.status ?? '') ? (q.status as IngestionJobStatus) : undefined;
  const source = q.source_id && /^[A-Za-z0-9][A-Za-z0-9._~-]{0,62}$/.test(q.source_id) ? q.source_id : undefined;
  const before = q.before && /^[1-9][0-9]{0,15}$/.test(q.before) ? Number(q.before) : undefined;
  const page = await listJobs(services.db, { status, source_id: source, before_id: before, limit: PAGE });
  const next = page.next === null ? null : `/dashboard/ingestion/jobs?${new URLSearchParams({ ...(status ? { status } : {}), ...(source ? { source_id: source } : {}), before: String(page.next) }).toString()}`;
  return (
    <Layout ctx={ctx} title="Ingestion jobs" crumbs={[{ label: 'Ingestion' }]} actions={<a class="button secondary" href="/dashboard/ingestion/workers">Workers</a>}>
      {message ? <p class="form-error" role="alert" safe>{message}</p> : ''}
      <form method="get" action="/dashboard/ingestion/jobs" class="filters">
        <label for="f-status">Status</label>
        <select id="f-status" name="status">
          <option value="">any</option>
          {INGESTION_JOB_STATUSES.map((s) => (s === status ? <option value={s} selected safe>{s}</option> : <option value={s} safe>{s}</option>))}
        </select>
        <label for="f-source">Source</label>
        <input id="f-source" name="source_id" value={attrValue(source ?? '')} />
        <button type="submit" class="button small">Filter</button>
      </form>
      {page.items.length === 0 ? (
        <Empty>No jobs match.</Empty>
      ) : (
        <div class="table-wrap">
          <table class="responsive">
            <thead>
              <tr>
                <th scope="col">Job</th>
                <th scope="col">Source</th>
                <th scope="col">File</th>
                <th scope="col">Status</th>
                <th scope="col">Stage</th>
                <th scope="col">Progress</th>
                <th scope="col">Retries</th>
                <th scope="col">Worker</th>
                <th scope="col">Error</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {page.items.map((j) => (
                <tr>
                  <td data-label="Job" safe>{String(j.id)}</td>
                  <td data-label="Source">
                    <a href={`/dashboard/data-sources/${seg(j.source_id)}/documents`} safe>{j.source_id}</a>
                  </td>
                  <td data-label="File" safe>{j.file_path}</td>
                  <td data-label="Status">
                    <span class={STATUS_BADGE[j.status]} safe>{j.status}</span>
                  </td>
                  <td data-label="Stage" safe>{j.stage ?? '—'}</td>
                  <td data-label="Progress">
                    <Progress job={j} />
                  </td>
                  <td data-label="Retries" safe>{String(j.retry_count)}</td>
                  <td data-label="Worker" safe>{j.worker_id ?? '—'}</td>
                  <td data-label="Error" safe>{j.error_message ?? ''}</td>
                  <td data-label="Actions">
                    <JobActions ctx={ctx} job={j} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {next ? (
        <p class="pager">
          <a href={next}>Older jobs</a>
        </p>
      ) : (
        ''
      )}
    </Layout>
  );
}

export function registerIngestionPages({ app, api, services }: AdminModuleContext): void {
  api.describe({ method: 'GET', url: '/dashboard/ingestion/jobs', summary: 'Ingestion jobs page', tags: ['console'], produces: ['text/html'] });
  app.get('/dashboard/ingestion/jobs', async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'jobs:read');
    return sendPage(reply, await jobsPage(ctx, req, services));
  });

  const render = async (req: FastifyRequest, ctx: PageContext, form: FormState) => jobsPage(ctx, req, services, form.message ?? Object.values(form.errors)[0]);
  const back = '/dashboard/ingestion/jobs';
  const jobOr404 = async (raw: unknown) => {
    const id = pageId(raw);
    if (!(await getJob(services.db, id))) throw new GatehouseError('not_found', 'There is no such job.');
    return id;
  };
  const illegal = async (id: number, action: 'retry' | 'cancel' | 'priority') => {
    const job = await getJob(services.db, id);
    return new GatehouseError('conflict', `A ${job?.status ?? 'missing'} job cannot be given ${action === 'priority' ? 'a new priority' : `a ${action}`}; allowed from: ${ACTION_FROM[action].join(', ')}.`);
  };
  for (const action of ['retry', 'cancel'] as const) {
    registerConsoleForm(app, api, {
      url: `/dashboard/ingestion/jobs/:id/${action}`,
      summary: `${action === 'retry' ? 'Retry' : 'Cancel'} an ingestion job (form)`,
      permission: 'jobs:write',
      schema: z.object({}),
      render,
      handle: async ({ req, reply }) => {
        const id = await jobOr404((req.params as { id?: unknown }).id);
        const job = action === 'retry' ? await retryJob(services.db, id, ACTION_FROM.retry) : await cancelJob(services.db, id, ACTION_FROM.cancel);
        if (!job) throw await illegal(id, action);
        return reply.redirect(back, 303);
      },
    });
  }
  registerConsoleForm(app, api, {
    url: '/dashboard/ingestion/jobs/:id/priority',
    summary: 'Change the priority of an ingestion job (form)',
    permission: 'jobs:write',
    schema: z.object({ priority_score: numberText(0) }),
    render,
    handle: async ({ req, reply, body }) => {
      const id = await jobOr404((req.params as { id?: unknown }).id);
      if (!(await setJobPriority(services.db, id, ACTION_FROM.priority, body.priority_score))) throw await illegal(id, 'priority');
      return reply.redirect(back, 303);
    },
  });

  api.describe({ method: 'GET', url: '/dashboard/ingestion/workers', summary: 'Workers page', tags: ['console'], produces: ['text/html'] });
  app.get('/dashboard/ingestion/workers', async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'jobs:read');
    const workers = await listWorkers(services.db, services.config.worker.stale_after_seconds);
    return sendPage(
      reply,
      <Layout ctx={ctx} title="Workers" crumbs={[{ label: 'Ingestion', href: '/dashboard/ingestion/jobs' }, { label: 'Workers' }]}>
        {workers.length === 0 ? (
          <Empty>No worker has sent a heartbeat yet.</Empty>
        ) : (
          <div class="table-wrap">
            <table class="responsive">
              <thead>
                <tr>
                  <th scope="col">Worker</th>
                  <th scope="col">State</th>
                  <th scope="col">Last heartbeat</th>
                  <th scope="col">Jobs in hand</th>
                  <th scope="col">Concurrency</th>
                  <th scope="col">Version</th>
                  <th scope="col">Stale jobs taken back</th>
                </tr>
              </thead>
              <tbody>
                {workers.map((w) => {
                  const stale = w.stale || w.stale_since !== null;
                  const m = w.metadata as Record<string, unknown>;
                  return (
                    <tr>
                      <td data-label="Worker" safe>{w.worker_id}</td>
                      <td data-label="State">{stale ? <span class="badge bad">stale</span> : <span class="badge ok">alive</span>}</td>
                      <td data-label="Last heartbeat">
                        <Time value={w.last_heartbeat} />
                      </td>
                      <td data-label="Jobs in hand" safe>{String(m.jobs_in_hand ?? '—')}</td>
                      <td data-label="Concurrency" safe>{String(m.concurrency ?? '—')}</td>
                      <td data-label="Version" safe>{String(m.version ?? '—')}</td>
                      <td data-label="Stale jobs taken back" safe>{String(w.stale_jobs_failed)}</td>
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

  api.describe({ method: 'GET', url: '/dashboard/data-sources/:source_id/documents', summary: "A source's ingested documents page", tags: ['console'], produces: ['text/html'] });
  app.get('/dashboard/data-sources/:source_id/documents', async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'jobs:read');
    const sourceId = String((req.params as { source_id?: unknown }).source_id ?? '');
    const source = await getDataSourceBySourceId(services.db, sourceId);
    if (!source) throw new GatehouseError('not_found', 'There is no such data source.');
    const q = query(req);
    const after = q.after && /^[1-9][0-9]{0,15}$/.test(q.after) ? Number(q.after) : undefined;
    const docs = await listDocuments(services.db, source.source_id, { limit: PAGE + 1, afterId: after });
    const more = docs.length > PAGE;
    const shown = docs.slice(0, PAGE);
    return sendPage(
      reply,
      <Layout
        ctx={ctx}
        title={`Documents of ${source.name}`}
        crumbs={[{ label: 'Ingestion', href: '/dashboard/ingestion/jobs' }, { label: source.source_id }]}
        actions={ctx.can('jobs:write') ? <PostButton ctx={ctx} action={`/dashboard/data-sources/${seg(source.source_id)}/sync`} label="Sync now" /> : ''}
      >
        {shown.length === 0 ? (
          <Empty>No documents ingested yet.</Empty>
        ) : (
          <div class="table-wrap">
            <table class="responsive">
              <thead>
                <tr>
                  <th scope="col">Path</th>
                  <th scope="col">Type</th>
                  <th scope="col">Pages</th>
                  <th scope="col">OCR pages</th>
                  <th scope="col">Personal data</th>
                  <th scope="col">Updated</th>
                </tr>
              </thead>
              <tbody>
                {shown.map((d) => {
                  const c = d.classification as { personal_data?: boolean; detectors?: Record<string, { count: number }> };
                  const found = Object.entries(c.detectors ?? {}).map(([type, v]) => `${type} × ${v.count}`);
                  return (
                    <tr>
                      <td data-label="Path" safe>{d.path}</td>
                      <td data-label="Type" safe>{d.content_type}</td>
                      <td data-label="Pages" safe>{`${d.page_count}${d.extract_truncated ? ' (truncated)' : ''}`}</td>
                      <td data-label="OCR pages" safe>{String(d.ocr_pages)}</td>
                      <td data-label="Personal data">{found.length === 0 ? <span class="badge ok">none found</span> : <span class="badge warn" safe>{found.join(', ')}</span>}</td>
                      <td data-label="Updated">
                        <Time value={d.updated_at} />
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
        {more ? (
          <p class="pager">
            <a href={`/dashboard/data-sources/${seg(source.source_id)}/documents?after=${seg(shown[shown.length - 1]!.id)}`}>More documents</a>
          </p>
        ) : (
          ''
        )}
      </Layout>,
    );
  });

  registerConsoleForm(app, api, {
    url: '/dashboard/data-sources/:source_id/sync',
    summary: "Sync a source's documents (form)",
    permission: 'jobs:write',
    schema: z.object({}),
    render: (req, ctx, form) => jobsPage(ctx, req, services, form.message),
    handle: async ({ req, reply }) => {
      const sourceId = String((req.params as { source_id?: unknown }).source_id ?? '');
      const source = await getDataSourceBySourceId(services.db, sourceId);
      if (!source) throw new GatehouseError('not_found', 'There is no such data source.');
      const cfg = services.config;
      const assets =
        source.source_type === 'files'
          ? await walkFiles(source, cfg.ingestion.files_roots)
          : await listHttpAssets(
              source,
              {
                egress: (await ingestionRuntimeFor(services)).egress,
                resolveSecret: services.resolveSecretRef,
                filesRoots: cfg.ingestion.files_roots,
                maxBytes: cfg.ingestion.max_document_bytes,
                timeoutMs: cfg.gateway.timeouts.upstream_request_ms,
                signal: AbortSignal.timeout(cfg.gateway.timeouts.upstream_request_ms),
              },
              100_000,
            );
      await applySync(services.db, source, assets);
      return reply.redirect(`/dashboard/ingestion/jobs?source_id=${seg(source.source_id)}`, 303);
    },
  });
}
