// The console's overview page (GET /dashboard/overview, where sign-in lands): counts, readiness and where to go next, server-rendered with every value escaped.
import { sql } from 'kysely';
import type { AdminModule } from '../module.js';
import { adminOf } from '../auth/principal.js';
import { sessionOf } from '../auth/guard.js';
import { escapeHtml, page } from '../auth/pages.js';

async function count(run: () => Promise<{ n: number | string | bigint } | undefined>): Promise<number> {
  const row = await run();
  return Number(row?.n ?? 0);
}

export const overviewModule: AdminModule = ({ app, api, services }) => {
  api.describe({ method: 'GET', url: '/dashboard/overview', summary: 'The console overview page (where sign-in lands)', tags: ['console'], produces: ['text/html'] });
  app.get('/dashboard/overview', async (req, reply) => {
    const admin = adminOf(req);
    const db = services.db;
    const [identities, sources, policies, pending] = await Promise.all([
      count(() => db.selectFrom('identities').select(sql<number>`count(*)`.as('n')).executeTakeFirst()),
      count(() => db.selectFrom('data_sources').select(sql<number>`count(*)`.as('n')).executeTakeFirst()),
      count(() => db.selectFrom('policies').select(sql<number>`count(*)`.as('n')).where('enabled', '=', true).executeTakeFirst()),
      count(() => db.selectFrom('approvals').select(sql<number>`count(*)`.as('n')).where('status', '=', 'pending').executeTakeFirst()),
    ]);
    const ready = await services.readiness.report();
    const csrf = sessionOf(req)?.record.csrf_token ?? '';
    const rows = Object.entries(ready.checks)
      .map(([name, c]) => `<tr><td>${escapeHtml(name)}</td><td>${c.ok ? 'ok' : '<strong>failing</strong>'}</td><td>${escapeHtml(c.detail)}</td></tr>`)
      .join('');
    const html = page(
      'Overview',
      `<h1>Gatehouse overview</h1>
<p>Signed in as <strong>${escapeHtml(admin.username)}</strong> (${escapeHtml(admin.roles.join(', '))}).</p>
<ul>
<li>${identities} identities</li>
<li>${sources} data sources</li>
<li>${policies} enabled policies</li>
<li>${pending} approvals waiting</li>
</ul>
<h2>Readiness: ${ready.status === 'ok' ? 'ok' : 'failing'}</h2>
<table>${rows}</table>
<p>Manage everything through the JSON API: <a href="/api/openapi.json">/api/openapi.json</a>.</p>
${csrf ? `<form method="post" action="/auth/logout"><input type="hidden" name="csrf_token" value="${escapeHtml(csrf)}"><button type="submit">Sign out</button></form>` : ''}`,
    );
    return reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(html);
  });
};
