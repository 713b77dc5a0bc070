// Console pages of ingestion (docs/ingestion.md "Console"): jobs with filters, progress and actions; workers with their health; a source's documents with their classification.
import { z } from 'zod';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AdminModuleContext } from '../admin/module.js';
import { demand, pageContext, sendPage, type PageContext } from '../admin/console/context.js';
import { Layout, CsrfField } from '../admin/console/layout.js';
import { DataTable } from '../admin/console/data-table.js';
import { PostButton, Time, pageId, seg } from '../admin/console/ui.js';
import { registerConsoleForm, numberText, intText, checkbox, attrValue, emptyForm, ConsoleForm, Field, CheckboxField, type FormState } from '../admin/console/forms.js';
import { GatehouseError } from '../errors/registry.js';
import { getDataSourceBySourceId } from '../store/repos/data-sources.js';
import { listDocuments } from '../store/repos/documents.js';
import { cancelJob, getJob, listJobs, retryJob, setJobPriority } from '../store/repos/ingestion-jobs.js';
import { listWorkers } from '../store/repos/workers.js';
import { INGESTION_JOB_STATUSES, type DataSource, type IngestionJob, type IngestionJobStatus, type SyncRun, type SyncSchedule } from '../store/schema.js';
import { ACTION_FROM, actionAllowed } from './states.js';
import { getSchedule, listRuns } from '../store/repos/sync-runs.js';
import { isGatehouseError } from '../errors/registry.js';
import { SYNCABLE_TYPES, intervalSchema, removeSchedule, setSchedule, syncNow } from './sync-routes.js';

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
      <DataTable
        rows={page.items}
        empty="No jobs match."
        columns={[
          { label: 'Job', text: (j) => String(j.id) },
          { label: 'Source', cell: (j) => <a href={`/dashboard/data-sources/${seg(j.source_id)}/documents`} safe>{j.source_id}</a> },
          { label: 'File', text: (j) => j.file_path },
          { label: 'Status', cell: (j) => <span class={STATUS_BADGE[j.status]} safe>{j.status}</span> },
          { label: 'Stage', text: (j) => j.stage ?? '—' },
          { label: 'Progress', cell: (j) => <Progress job={j} /> },
          { label: 'Retries', text: (j) => String(j.retry_count) },
          { label: 'Worker', text: (j) => j.worker_id ?? '—' },
          { label: 'Error', text: (j) => j.error_message ?? '' },
          { label: 'Actions', cell: (j) => <JobActions ctx={ctx} job={j} /> },
        ]}
      />
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

/** What the personal-data detectors found in a document (counts per detector), as a badge. */
function PersonalData({ classification }: { classification: unknown }): JSX.Element {
  const c = classification as { detectors?: Record<string, { count: number }> };
  const found = Object.entries(c.detectors ?? {}).map(([type, v]) => `${type} × ${v.count}`);
  return found.length === 0 ? <span class="badge ok">none found</span> : <span class="badge warn" safe>{found.join(', ')}</span>;
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
        <DataTable
          rows={workers}
          empty="No worker has sent a heartbeat yet."
          columns={[
            { label: 'Worker', text: (w) => w.worker_id },
            { label: 'State', cell: (w) => (w.stale || w.stale_since !== null ? <span class="badge bad">stale</span> : <span class="badge ok">alive</span>) },
            { label: 'Last heartbeat', cell: (w) => <Time value={w.last_heartbeat} /> },
            { label: 'Jobs in hand', text: (w) => String((w.metadata as Record<string, unknown>).jobs_in_hand ?? '—') },
            { label: 'Concurrency', text: (w) => String((w.metadata as Record<string, unknown>).concurrency ?? '—') },
            { label: 'Version', text: (w) => String((w.metadata as Record<string, unknown>).version ?? '—') },
            { label: 'Stale jobs taken back', text: (w) => String(w.stale_jobs_failed) },
          ]}
        />
      </Layout>,
    );
  });

  api.describe({ method: 'GET', url: '/dashboard/data-sources/:source_id/documents', summary: "A source's ingested documents page", tags: ['console'], produces: ['text/html'] });
  app.get('/dashboard/data-sources/:source_id/documents', async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'jobs:read');
    return sendPage(reply, await documentsPage(ctx, req, services, emptyForm()));
  });

  // "Sync now" and the schedule forms run the same code as the admin API's sync routes (sync-routes.ts).
  const sourceIdOf = (req: FastifyRequest) => String((req.params as { source_id?: unknown }).source_id ?? '');
  const renderDocuments = (req: FastifyRequest, ctx: PageContext, form: FormState) => documentsPage(ctx, req, services, form);
  /** A refused sync is shown on the documents page with its reason and status, like a refused form. */
  const orRefusal = async (req: FastifyRequest, reply: FastifyReply, ctx: PageContext, work: () => Promise<unknown>, to: string) => {
    try {
      await work();
    } catch (err) {
      if (!isGatehouseError(err) || err.code === 'not_found' || err.code === 'internal' || err.code === 'validation_failed') throw err;
      return sendPage(reply, await documentsPage(ctx, req, services, { values: {}, errors: {}, message: err.message }), err.spec.http);
    }
    return reply.redirect(to, 303);
  };
  registerConsoleForm(app, api, {
    url: '/dashboard/data-sources/:source_id/sync',
    summary: "Sync a source's documents now (form)",
    permission: 'jobs:write',
    schema: z.object({}),
    render: renderDocuments,
    handle: ({ req, reply, ctx }) => orRefusal(req, reply, ctx, () => syncNow(services, req, sourceIdOf(req)), `/dashboard/ingestion/jobs?source_id=${seg(sourceIdOf(req))}`),
  });
  const minInterval = services.config.ingestion.sync.min_interval_seconds;
  registerConsoleForm(app, api, {
    url: '/dashboard/data-sources/:source_id/sync/schedule',
    summary: "Set a source's sync schedule (form)",
    permission: 'jobs:write',
    schema: z.object({ interval_seconds: intText(0, 0, Number.MAX_SAFE_INTEGER).pipe(intervalSchema(minInterval)), enabled: checkbox() }),
    render: renderDocuments,
    handle: ({ req, reply, ctx, body }) => orRefusal(req, reply, ctx, () => setSchedule(services, req, sourceIdOf(req), body), `/dashboard/data-sources/${seg(sourceIdOf(req))}/documents`),
  });
  registerConsoleForm(app, api, {
    url: '/dashboard/data-sources/:source_id/sync/schedule/delete',
    summary: "Remove a source's sync schedule (form)",
    permission: 'jobs:write',
    schema: z.object({}),
    render: renderDocuments,
    handle: ({ req, reply, ctx }) => orRefusal(req, reply, ctx, () => removeSchedule(services, req, sourceIdOf(req)), `/dashboard/data-sources/${seg(sourceIdOf(req))}/documents`),
  });
}

const RUN_BADGE: Record<SyncRun['status'], string> = { running: 'badge warn', succeeded: 'badge ok', failed: 'badge bad' };

/** The source's schedule and newest sync run, and (with jobs:write) the forms to sync now and to set the schedule. */
function SyncPanel({ ctx, source, schedule, last, form, minInterval }: { ctx: PageContext; source: DataSource; schedule: SyncSchedule | undefined; last: SyncRun | undefined; form: FormState; minInterval: number }): JSX.Element {
  const base = `/dashboard/data-sources/${seg(source.source_id)}`;
  const result = last?.result as { assets_seen?: number; jobs_created?: number; jobs_requeued?: number } | null | undefined;
  return (
    <section class="panel" aria-labelledby="sync-heading">
      <h2 id="sync-heading">Sync</h2>
      <dl class="props">
        <dt>Schedule</dt>
        <dd>
          {schedule ? (
            <span safe>{`every ${schedule.interval_seconds} s${schedule.enabled ? '' : ' (paused)'}`}</span>
          ) : (
            <span class="muted">none: the source is synced only when asked</span>
          )}
        </dd>
        <dt>Next sync</dt>
        <dd>{schedule?.enabled ? <Time value={schedule.next_sync_at} /> : <span class="muted">—</span>}</dd>
        <dt>Last sync</dt>
        <dd>
          {last ? (
            <span>
              <span class={RUN_BADGE[last.status]} safe>{last.status}</span> <span safe>{`${last.trigger}, started`}</span> <Time value={last.started_at} />
              {result ? <span safe>{` — ${result.assets_seen ?? 0} seen, ${result.jobs_created ?? 0} created, ${result.jobs_requeued ?? 0} requeued`}</span> : ''}
              {last.error_message ? <span class="form-error" safe>{` ${last.error_message}`}</span> : ''}
            </span>
          ) : (
            <span class="muted">never</span>
          )}
        </dd>
      </dl>
      {ctx.can('jobs:write') ? (
        <div>
          <ConsoleForm ctx={ctx} form={form} action={`${base}/sync/schedule`} submit={schedule ? 'Update schedule' : 'Set schedule'}>
            <Field form={form} name="interval_seconds" label="Interval (seconds)" type="number" min={minInterval} value={schedule ? String(schedule.interval_seconds) : ''} hint={`At least ${minInterval} seconds.`} required />
            <CheckboxField form={form} name="enabled" label="Enabled" checked={schedule?.enabled ?? true} />
          </ConsoleForm>
          {schedule ? <PostButton ctx={ctx} action={`${base}/sync/schedule/delete`} label="Remove schedule" variant="secondary" /> : ''}
        </div>
      ) : (
        ''
      )}
    </section>
  );
}

async function documentsPage(ctx: PageContext, req: FastifyRequest, services: AdminModuleContext['services'], form: FormState): Promise<JSX.Element> {
  const sourceId = String((req.params as { source_id?: unknown }).source_id ?? '');
  const source = await getDataSourceBySourceId(services.db, sourceId);
  if (!source) throw new GatehouseError('not_found', 'There is no such data source.');
  const q = query(req);
  const after = q.after && /^[1-9][0-9]{0,15}$/.test(q.after) ? Number(q.after) : undefined;
  const [docs, schedule, runs] = await Promise.all([
    listDocuments(services.db, source.source_id, { limit: PAGE + 1, afterId: after }),
    getSchedule(services.db, source.source_id),
    listRuns(services.db, source.source_id, { limit: 1 }),
  ]);
  const more = docs.length > PAGE;
  const shown = docs.slice(0, PAGE);
  const syncable = SYNCABLE_TYPES.includes(source.source_type);
  return (
    <Layout
      ctx={ctx}
      title={`Documents of ${source.name}`}
      crumbs={[{ label: 'Ingestion', href: '/dashboard/ingestion/jobs' }, { label: source.source_id }]}
      actions={ctx.can('jobs:write') && syncable ? <PostButton ctx={ctx} action={`/dashboard/data-sources/${seg(source.source_id)}/sync`} label="Sync now" /> : ''}
    >
      {syncable ? <SyncPanel ctx={ctx} source={source} schedule={schedule} last={runs[0]} form={form} minInterval={services.config.ingestion.sync.min_interval_seconds} /> : form.message ? <p class="form-error" role="alert" safe>{form.message}</p> : ''}
      <DataTable
        rows={shown}
        empty="No documents ingested yet."
        columns={[
          { label: 'Path', text: (d) => d.path },
          { label: 'Type', text: (d) => d.content_type },
          { label: 'Pages', text: (d) => `${d.page_count}${d.extract_truncated ? ' (truncated)' : ''}` },
          { label: 'OCR pages', text: (d) => String(d.ocr_pages) },
          { label: 'Personal data', cell: (d) => <PersonalData classification={d.classification} /> },
          { label: 'Catalog asset', cell: (d) => (d.catalog_asset_id === null ? <span class="muted">none</span> : <code safe>{d.catalog_asset_id}</code>) },
          { label: 'Updated', cell: (d) => <Time value={d.updated_at} /> },
        ]}
      />
      {more ? (
        <p class="pager">
          <a href={`/dashboard/data-sources/${seg(source.source_id)}/documents?after=${seg(shown[shown.length - 1]!.id)}`}>More documents</a>
        </p>
      ) : (
        ''
      )}
    </Layout>
  );
}
