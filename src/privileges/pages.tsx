// The console's view of managed privileges (docs/least-privilege.md "Reconciliation"): a source's state and its pending reconciliation plan, computed as a dry run on every visit and applied nowhere.
import type { FastifyRequest } from 'fastify';
import type { AdminModuleContext } from '../admin/module.js';
import { callApi, okOrThrow } from '../admin/console/api-call.js';
import { demand, pageContext, sendPage } from '../admin/console/context.js';
import { Layout } from '../admin/console/layout.js';
import { Empty, Time, seg } from '../admin/console/ui.js';
import { GatehouseError } from '../errors/registry.js';

const SOURCES = '/dashboard/data-sources';

export const privilegesPageUrl = (sourceId: string): string => `${SOURCES}/${seg(sourceId)}/privileges`;

/** What the plan's counts mean, in the order the statements run (governance/privileges/plan.ts planStatements). */
const SUMMARY_LABELS: ReadonlyArray<readonly [string, string]> = [
  ['create_roles', 'Roles to create'],
  ['create_schemas', 'Masking schemas to create'],
  ['create_views', 'Masking views to create or make again'],
  ['reset_attributes', 'Roles whose attributes drifted'],
  ['revoke_memberships', 'Memberships to revoke'],
  ['revokes', 'Privileges to revoke'],
  ['grants', 'Privileges to grant'],
  ['grant_login', 'Roles to give the login user'],
  ['drop_views', 'Masking views to drop'],
  ['drop_schemas', 'Masking schemas to drop'],
  ['drop_roles', 'Roles to drop'],
];

interface PlanAnswer {
  ok: boolean;
  summary: Record<string, number>;
  drift: number;
  statements: string[];
  statement_count: number;
  error: string | null;
  duration_ms: number;
  session_roles: Record<string, string>;
  base_role: string | null;
}

interface StateAnswer {
  status: string;
  reason: string | null;
  at: string | null;
  session_roles: Record<string, string>;
  base_role: string | null;
}

async function privilegesPage(app: AdminModuleContext['app'], req: FastifyRequest, sourceId: string): Promise<JSX.Element> {
  const ctx = pageContext(req);
  const source = await callApi(app, req, 'GET', `/api/data-sources/${seg(sourceId)}`);
  if (source.status === 404 || source.status === 422) throw new GatehouseError('not_found', 'There is no such data source.');
  const config = (okOrThrow(source) as { connection_config?: { privileges?: unknown } | null }).connection_config;
  const crumbs = [{ label: 'Data sources', href: SOURCES }, { label: sourceId, href: `${SOURCES}/${seg(sourceId)}` }, { label: 'Privileges' }];
  if (config?.privileges !== 'managed') {
    return (
      <Layout ctx={ctx} title={`Managed privileges of ${sourceId}`} crumbs={crumbs}>
        <Empty>This data source does not use managed privileges: its sessions run as its configured user (docs/least-privilege.md "Turning it on").</Empty>
      </Layout>
    );
  }
  const st = okOrThrow(await callApi(app, req, 'GET', `/api/data-sources/${seg(sourceId)}/privileges`)) as StateAnswer;
  const plan = okOrThrow(await callApi(app, req, 'POST', `/api/data-sources/${seg(sourceId)}/privileges/dry-run`)) as PlanAnswer;
  const roles = Object.entries(plan.ok ? plan.session_roles : st.session_roles).sort(([a], [b]) => Number(a) - Number(b));
  return (
    <Layout ctx={ctx} title={`Managed privileges of ${sourceId}`} crumbs={crumbs}>
      <dl class="props">
        <dt>Source id</dt>
        <dd>
          <code safe>{sourceId}</code>
        </dd>
        <dt>Sessions</dt>
        <dd>
          {st.status === 'ok' ? (
            <span class="badge ok">in place</span>
          ) : (
            <span class={st.status === 'failed' ? 'badge bad' : 'badge warn'} safe>
              {st.status === 'failed' ? 'refused (57P03)' : 'pending'}
            </span>
          )}{' '}
          <span safe>{st.reason ?? ''}</span>
        </dd>
        <dt>Last reconciliation here</dt>
        <dd>
          <Time value={st.at} />
        </dd>
      </dl>
      <h2 id="plan">Pending plan</h2>
      <p>A dry run against the source's own catalogs, computed now and applied nowhere: what the next reconciliation would change.</p>
      {plan.error !== null ? (
        <p class="notice" role="alert" safe>
          {`The plan cannot be computed: ${plan.error}`}
        </p>
      ) : (
        ''
      )}
      {plan.ok && plan.statement_count === 0 ? <Empty>Nothing to do: the database's privileges equal the gateway's rules.</Empty> : ''}
      <div class="table-wrap">
        <table>
          <caption class="sr-only">Changes the plan makes, by kind</caption>
          <thead>
            <tr>
              <th scope="col">Change</th>
              <th scope="col">Count</th>
            </tr>
          </thead>
          <tbody>
            {SUMMARY_LABELS.map(([key, label]) => (
              <tr>
                <td safe>{label}</td>
                <td safe>{String(plan.summary[key] ?? 0)}</td>
              </tr>
            ))}
            <tr>
              <td>Drift (made outside the gateway, undone by the plan)</td>
              <td safe>{String(plan.drift)}</td>
            </tr>
          </tbody>
        </table>
      </div>
      {plan.statements.length > 0 ? (
        <>
          <h3 safe>{plan.statements.length < plan.statement_count ? `Statements (the first ${plan.statements.length} of ${plan.statement_count})` : `Statements (${plan.statement_count})`}</h3>
          <ol class="statements">
            {plan.statements.map((s) => (
              <li>
                <code safe>{s}</code>
              </li>
            ))}
          </ol>
        </>
      ) : (
        ''
      )}
      <h2 id="sessions">Session roles</h2>
      {roles.length === 0 ? (
        <Empty>No identity holds an active grant on this source: every session runs as the base role (CONNECT only).</Empty>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">The managed role each identity's sessions run as</caption>
            <thead>
              <tr>
                <th scope="col">Identity</th>
                <th scope="col">Role</th>
              </tr>
            </thead>
            <tbody>
              {roles.map(([id, role]) => (
                <tr>
                  <td>
                    <a href={`/dashboard/access-control/identities/${seg(id)}`} safe>
                      {`#${id}`}
                    </a>
                  </td>
                  <td>
                    <code safe>{role}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <p>
        Others run as <code safe>{plan.base_role ?? st.base_role ?? '—'}</code>. Reconcile now with <code safe>{`POST /api/data-sources/${sourceId}/privileges/reconcile`}</code>.
      </p>
    </Layout>
  );
}

export function registerPrivilegePages({ app, api }: Pick<AdminModuleContext, 'app' | 'api'>): void {
  api.describe({ method: 'GET', url: `${SOURCES}/:source_id/privileges`, summary: "A managed source's privilege state and its pending reconciliation plan (a dry run, applied nowhere)", tags: ['privileges', 'console'], produces: ['text/html'] });
  app.get(`${SOURCES}/:source_id/privileges`, async (req, reply) => {
    const ctx = pageContext(req);
    demand(ctx, 'sources:read');
    const sourceId = (req.params as { source_id?: string }).source_id ?? '';
    return sendPage(reply, await privilegesPage(app, req, sourceId));
  });
}
