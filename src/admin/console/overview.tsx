// The console's overview page (GET /dashboard/overview, where sign-in lands): the last hour's and day's traffic from the audit rollups, a requests-per-minute chart, the newest pending approvals, readiness of every dependency and the audit writer.
import { sql } from 'kysely';
import { alertsDb } from '../../alerts/routes.js';
import { floorMinute, minuteTotals, type MinuteTotals } from '../../alerts/figures.js';
import type { AdminModuleContext } from '../module.js';
import { pageContext, sendPage } from './context.js';
import { DataTable } from './data-table.js';
import { Layout } from './layout.js';
import { Time } from './ui.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
/** Newest pending approvals shown (the inbox lists them all). */
const NEWEST_PENDING = 5;

export interface Period {
  requests: number;
  denials: number;
  errors: number;
  cache_hits: number;
  cache_lookups: number;
}

export function sumPeriod(rows: readonly MinuteTotals[], fromMs: number): Period {
  const p: Period = { requests: 0, denials: 0, errors: 0, cache_hits: 0, cache_lookups: 0 };
  for (const r of rows) {
    if (r.minute < fromMs) continue;
    p.requests += r.requests;
    p.denials += r.denials;
    p.errors += r.errors;
    p.cache_hits += r.cache_hits;
    p.cache_lookups += r.cache_lookups;
  }
  return p;
}

/** A share as a percentage with one decimal, or a dash when there is nothing to divide by. */
export function percent(part: number, whole: number): string {
  return whole === 0 ? '—' : `${((part / whole) * 100).toFixed(1)} %`;
}

/** The uPlot data of the last hour, one point per minute (minutes without traffic are 0): [x seconds, requests, denials, errors]. */
function hourChart(rows: readonly MinuteTotals[], nowMs: number): number[][] {
  const start = floorMinute(nowMs - HOUR_MS);
  const by = new Map(rows.map((r) => [r.minute, r]));
  const xs: number[] = [];
  const req: number[] = [];
  const den: number[] = [];
  const err: number[] = [];
  for (let m = start; m <= floorMinute(nowMs); m += 60_000) {
    const r = by.get(m);
    xs.push(m / 1000);
    req.push(r?.requests ?? 0);
    den.push(r?.denials ?? 0);
    err.push(r?.errors ?? 0);
  }
  return [xs, req, den, err];
}

interface PendingRow {
  id: number;
  identity_id: number;
  source_id: string;
  sql_text: string;
  risk_level: string;
  created_at: Date | null;
  expires_at: Date | null;
}

function Figures({ label, p }: { label: string; p: Period }): JSX.Element {
  return (
    <section aria-label={label}>
      <h2 safe>{label}</h2>
      <ul class="stats">
        <li>
          <strong>{p.requests}</strong> requests
        </li>
        <li>
          <strong>{p.denials}</strong> denials
        </li>
        <li>
          <strong safe>{percent(p.errors, p.requests)}</strong> error rate
        </li>
        <li>
          <strong safe>{percent(p.cache_hits, p.cache_lookups)}</strong> cache hit ratio
        </li>
      </ul>
    </section>
  );
}

export function registerOverviewPage({ app, api, services }: AdminModuleContext): void {
  api.describe({ method: 'GET', url: '/dashboard/overview', summary: 'The console overview (where sign-in lands): last hour and day, chart, newest pending approvals, readiness', tags: ['console'], produces: ['text/html'] });
  app.get('/dashboard/overview', async (req, reply) => {
    const ctx = pageContext(req);
    const db = services.db;
    const nowMs = Date.now();
    const canApprovals = ctx.can('approvals:read');
    const [minutes, pendingCount, newest, ready] = await Promise.all([
      minuteTotals(alertsDb(services), nowMs - DAY_MS, nowMs),
      db.selectFrom('approvals').select(sql<string>`count(*)`.as('n')).where('status', '=', 'pending').executeTakeFirst(),
      canApprovals
        ? db.selectFrom('approvals').select(['id', 'identity_id', 'source_id', 'sql_text', 'risk_level', 'created_at', 'expires_at']).where('status', '=', 'pending').orderBy('created_at', 'desc').orderBy('id', 'desc').limit(NEWEST_PENDING).execute()
        : Promise.resolve([] as PendingRow[]),
      services.readiness.report(),
    ]);
    const hour = sumPeriod(minutes, floorMinute(nowMs - HOUR_MS));
    const day = sumPeriod(minutes, floorMinute(nowMs - DAY_MS));
    const writer = services.audit.stats();
    const chart = { series: [{ label: 'Requests', color: '#2f6fdf' }, { label: 'Denials', color: '#c2410c' }, { label: 'Errors (5xx)', color: '#b91c1c' }], data: hourChart(minutes, nowMs) };
    return sendPage(
      reply,
      <Layout ctx={ctx} title="Overview" scripts={['uPlot.min.js']}>
        <ul class="stats">
          <li>
            {canApprovals ? (
              <a href="/dashboard/approvals">
                <strong>{Number(pendingCount?.n ?? 0)}</strong> approvals waiting
              </a>
            ) : (
              <span>
                <strong>{Number(pendingCount?.n ?? 0)}</strong> approvals waiting
              </span>
            )}
          </li>
        </ul>
        <Figures label="Last hour" p={hour} />
        <Figures label="Last 24 hours" p={day} />
        <figure class="chart-figure">
          <div class="chart" data-chart={JSON.stringify(chart)} role="img" aria-label={`Requests per minute over the last hour: ${hour.requests} requests, ${hour.denials} denials, ${hour.errors} errors`}></div>
          <figcaption>Requests, denials and errors per minute, last hour (UTC)</figcaption>
        </figure>
        {canApprovals ? (
          <>
            <h2>Newest pending approvals</h2>
            <DataTable
              rows={newest}
              caption="Newest pending approvals"
              empty="No approvals are waiting."
              columns={[
                { label: 'Approval', cell: (a) => <a href={`/dashboard/approvals/${a.id}`}>Open #{a.id}</a> },
                { label: 'Source', text: (a) => a.source_id },
                { label: 'Request', text: (a) => (a.sql_text.length > 100 ? `${a.sql_text.slice(0, 100)}…` : a.sql_text) },
                { label: 'Risk', text: (a) => a.risk_level },
                { label: 'Queued', cell: (a) => <Time value={a.created_at} /> },
                { label: 'Expires', cell: (a) => <Time value={a.expires_at} /> },
              ]}
            />
          </>
        ) : (
          ''
        )}
        <h2>Readiness: {ready.status === 'ok' ? 'ok' : 'failing'}</h2>
        <DataTable
          rows={Object.entries(ready.checks)}
          caption="Readiness of every dependency"
          empty="No checks."
          columns={[
            { label: 'Check', text: ([name]) => name },
            { label: 'State', cell: ([, c]) => (c.ok ? <span class="badge ok">ok</span> : <span class="badge bad">failing</span>) },
            { label: 'Detail', text: ([, c]) => c.detail },
          ]}
        />
        <h2>Audit writer</h2>
        <dl class="props">
          <dt>Mode</dt>
          <dd safe>{writer.mode}</dd>
          <dt>Buffered</dt>
          <dd>
            {writer.buffered} of {writer.buffer_capacity}
          </dd>
          <dt>Spooled</dt>
          <dd>
            {writer.spooled_entries} entries, {writer.spooled_bytes} bytes
          </dd>
          <dt>Written since start</dt>
          <dd>{writer.written}</dd>
          <dt>Dropped</dt>
          <dd>{writer.dropped}</dd>
        </dl>
      </Layout>,
    );
  });
}
