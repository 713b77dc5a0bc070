// Console approvals inbox under /dashboard/approvals: pending first and oldest first with age and expiry, history by status, the detail of one request, approve or reject after a confirmation step.
import { z } from 'zod';
import { GatehouseError } from '../../errors/registry.js';
import type { AdminModuleContext } from '../module.js';
import { callApi, okOrThrow } from './api-call.js';
import { demand, pageContext, sendPage, type PageContext } from './context.js';
import { registerConsoleForm } from './forms.js';
import { Layout } from './layout.js';
import { DataTable } from './data-table.js';
import { PostButton, Time, pageId } from './ui.js';

const BASE = '/dashboard/approvals';
const STATUSES = ['pending', 'approved', 'rejected', 'expired', 'executed', 'failed'] as const;
const crumbs = (...more: Array<{ label: string; href?: string }>) => [{ label: 'Approvals', href: BASE }, ...more];

interface Approval {
  id: number;
  identity_id: number;
  source_id: string;
  sql_text: string;
  risk_level: string;
  status: string;
  approved_by: string | null;
  created_at: string | null;
  executed_at: string | null;
  expires_at: string | null;
  request_metadata: Record<string, unknown>;
}

function minutes(ms: number): string {
  const m = Math.max(0, Math.round(ms / 60_000));
  return m < 60 ? `${m} min` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

function StatusBadge({ status }: { status: string }): JSX.Element {
  const cls = status === 'pending' ? 'badge warn' : status === 'executed' || status === 'approved' ? 'badge ok' : 'badge bad';
  return (
    <span class={cls} safe>
      {status}
    </span>
  );
}

export function registerApprovalPages({ app, api }: AdminModuleContext): void {
  api.describe({ method: 'GET', url: BASE, summary: 'Approvals inbox (pending oldest first) and history by status', tags: ['console'], produces: ['text/html'] });
  app.get(BASE, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'approvals:read');
    const raw = (req.query as { status?: string }).status;
    const status = (STATUSES as readonly string[]).includes(raw ?? '') ? (raw as string) : 'pending';
    const rows = okOrThrow(await callApi(app, req, 'GET', `/api/approvals?status=${status}`)) as Approval[];
    // The inbox works oldest first: the request closest to expiring is at the top.
    if (status === 'pending') rows.sort((a, b) => (a.created_at ?? '').localeCompare(b.created_at ?? '') || a.id - b.id);
    const now = Date.now();
    return sendPage(
      reply,
      <Layout ctx={ctx} title={status === 'pending' ? 'Approvals inbox' : `Approvals: ${status}`} crumbs={crumbs({ label: status })}>
        <nav aria-label="Approval status" class="form-actions">
          {STATUSES.map((s) => (
            <a href={`${BASE}?status=${s}`} class={s === status ? 'button small' : 'button small secondary'} aria-current={s === status ? 'page' : undefined}>
              {s}
            </a>
          ))}
        </nav>
        <DataTable
          rows={rows}
          empty={`No ${status} approvals.`}
          columns={[
            { label: 'Id', cell: (a) => <a href={`${BASE}/${a.id}`}>#{a.id}</a> },
            { label: 'Source', cell: (a) => <code safe>{a.source_id}</code> },
            { label: 'Request', cell: (a) => <code safe>{a.sql_text.length > 120 ? `${a.sql_text.slice(0, 120)}…` : a.sql_text}</code> },
            { label: 'Risk', text: (a) => a.risk_level },
            { label: 'Status', cell: (a) => <StatusBadge status={a.status} /> },
            {
              label: status === 'pending' ? 'Age / expires' : 'Created',
              cell: (a) =>
                status === 'pending' && a.created_at ? (
                  <span safe>
                    {minutes(now - Date.parse(a.created_at))} old
                    {a.expires_at ? ` · expires in ${minutes(Date.parse(a.expires_at) - now)}` : ''}
                  </span>
                ) : (
                  <Time value={a.created_at} />
                ),
            },
          ]}
        />
      </Layout>,
    );
  });

  const load = async (req: Parameters<typeof pageContext>[0], id: number): Promise<Approval> => {
    const answer = await callApi(app, req, 'GET', `/api/approvals/${id}`);
    if (answer.status === 404) throw new GatehouseError('not_found', 'There is no such approval.');
    return okOrThrow(answer) as Approval;
  };

  const detail = (ctx: PageContext, a: Approval, confirm?: 'approve' | 'reject') => (
    <Layout ctx={ctx} title={`Approval #${a.id}`} crumbs={crumbs({ label: `#${a.id}` })}>
      <dl class="props">
        <dt>Status</dt>
        <dd>
          <StatusBadge status={a.status} />
        </dd>
        <dt>Identity</dt>
        <dd>
          <a href={`/dashboard/access-control/identities/${a.identity_id}`}>#{a.identity_id}</a>
        </dd>
        <dt>Source</dt>
        <dd>
          <code safe>{a.source_id}</code>
        </dd>
        <dt>Risk</dt>
        <dd safe>{a.risk_level}</dd>
        <dt>Created</dt>
        <dd>
          <Time value={a.created_at} />
        </dd>
        <dt>Expires</dt>
        <dd>
          <Time value={a.expires_at} />
        </dd>
        <dt>Decided by</dt>
        <dd safe>{a.approved_by ?? ''}</dd>
        <dt>Executed</dt>
        <dd>
          <Time value={a.executed_at} />
        </dd>
      </dl>
      <h2>Request</h2>
      <pre safe>{a.sql_text}</pre>
      <h2>Request details and policy trace</h2>
      <pre safe>{JSON.stringify(a.request_metadata, null, 2)}</pre>
      {a.status === 'pending' && ctx.can('approvals:decide') ? (
        confirm ? (
          <div class="panel">
            <p class="notice" role="alert">{confirm === 'approve' ? 'Approve this request? It executes once, now, with the original identity and source.' : 'Reject this request? It will never execute.'}</p>
            <div class="form-actions">
              <PostButton ctx={ctx} action={`${BASE}/${a.id}/${confirm}`} label={confirm === 'approve' ? 'Yes, approve and execute' : 'Yes, reject'} variant={confirm === 'reject' ? 'danger' : undefined} />
              <a class="button secondary small" href={`${BASE}/${a.id}`}>
                Cancel
              </a>
            </div>
          </div>
        ) : (
          <div class="form-actions">
            <a class="button" href={`${BASE}/${a.id}?confirm=approve`}>
              Approve…
            </a>
            <a class="button danger" href={`${BASE}/${a.id}?confirm=reject`}>
              Reject…
            </a>
          </div>
        )
      ) : (
        ''
      )}
    </Layout>
  );

  api.describe({ method: 'GET', url: `${BASE}/:id`, summary: 'One approval: the request, risk, policy trace; approve/reject with a confirmation step', tags: ['console'], produces: ['text/html'] });
  app.get(`${BASE}/:id`, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'approvals:read');
    const c = (req.query as { confirm?: string }).confirm;
    return sendPage(reply, detail(ctx, await load(req, pageId((req.params as { id: string }).id)), c === 'approve' || c === 'reject' ? c : undefined));
  });

  for (const action of ['approve', 'reject'] as const) {
    registerConsoleForm(app, api, {
      url: `${BASE}/:id/${action}`,
      summary: `${action === 'approve' ? 'Approve (and execute)' : 'Reject'} a pending approval (after the confirmation step)`,
      permission: 'approvals:decide',
      schema: z.object({}),
      render: async (req, ctx) => detail(ctx, await load(req, pageId((req.params as { id: string }).id))),
      handle: async ({ req, reply }) => {
        const id = pageId((req.params as { id: string }).id);
        okOrThrow(await callApi(app, req, 'POST', `/api/approvals/${id}/${action}`));
        return reply.redirect(`${BASE}/${id}`, 303);
      },
    });
  }
}
