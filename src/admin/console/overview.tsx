// The console's overview page (GET /dashboard/overview, where sign-in lands): counts and readiness of every dependency.
import { sql } from 'kysely';
import type { AdminModuleContext } from '../module.js';
import { pageContext, sendPage } from './context.js';
import { Layout } from './layout.js';

async function count(run: () => Promise<{ n: number | string | bigint } | undefined>): Promise<number> {
  const row = await run();
  return Number(row?.n ?? 0);
}

export function registerOverviewPage({ app, api, services }: AdminModuleContext): void {
  api.describe({ method: 'GET', url: '/dashboard/overview', summary: 'The console overview page (where sign-in lands)', tags: ['console'], produces: ['text/html'] });
  app.get('/dashboard/overview', async (req, reply) => {
    const ctx = pageContext(req);
    const db = services.db;
    const [identities, sources, policies, pending] = await Promise.all([
      count(() => db.selectFrom('identities').select(sql<number>`count(*)`.as('n')).executeTakeFirst()),
      count(() => db.selectFrom('data_sources').select(sql<number>`count(*)`.as('n')).executeTakeFirst()),
      count(() => db.selectFrom('policies').select(sql<number>`count(*)`.as('n')).where('enabled', '=', true).executeTakeFirst()),
      count(() => db.selectFrom('approvals').select(sql<number>`count(*)`.as('n')).where('status', '=', 'pending').executeTakeFirst()),
    ]);
    const ready = await services.readiness.report();
    return sendPage(
      reply,
      <Layout ctx={ctx} title="Overview">
        <ul class="stats">
          <li>
            <strong>{identities}</strong> identities
          </li>
          <li>
            <strong>{sources}</strong> data sources
          </li>
          <li>
            <strong>{policies}</strong> enabled policies
          </li>
          <li>
            <strong>{pending}</strong> approvals waiting
          </li>
        </ul>
        <h2>Readiness: {ready.status === 'ok' ? 'ok' : 'failing'}</h2>
        <table>
          <thead>
            <tr>
              <th scope="col">Check</th>
              <th scope="col">State</th>
              <th scope="col">Detail</th>
            </tr>
          </thead>
          <tbody>
            {Object.entries(ready.checks).map(([name, c]) => (
              <tr>
                <td safe>{name}</td>
                <td>{c.ok ? <span class="badge ok">ok</span> : <span class="badge bad">failing</span>}</td>
                <td safe>{c.detail}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Layout>,
    );
  });
}
