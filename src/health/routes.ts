// GET /health and GET /ready, shared by the gateway and admin listeners.
import type { FastifyInstance } from 'fastify';
import type { Readiness } from './readiness.js';

export function registerHealthRoutes(app: FastifyInstance, readiness: Readiness, opts: { details: boolean }): void {
  app.get('/health', async () => ({ status: 'ok' }));
  app.get('/ready', async (_req, reply) => {
    const report = await readiness.report();
    const body = opts.details
      ? report
      : { status: report.status, checks: Object.fromEntries(Object.entries(report.checks).map(([k, v]) => [k, { ok: v.ok, detail: v.ok ? 'ok' : 'failing' }])) };
    reply.header('cache-control', 'no-store');
    return reply.code(report.status === 'ok' ? 200 : 503).send(body);
  });
}
