// The admin listener (spec §4 Admin): health, readiness and the console entry now; the JSON API, auth and console pages register here.
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import { createHttpServer } from '../http/server.js';
import { registerHealthRoutes } from '../health/routes.js';
import { errorRegistry, isGatehouseError, type GatehouseError } from '../errors/registry.js';
import type { Services } from '../runtime/services.js';
import { ApiRegistry } from './api/route.js';
import { storeErrorAsHttp } from './api/shared.js';
import { malformedJsonError } from '../http/validation.js';
import { adminModules } from './modules.js';
import { SECURITY_HEADERS } from './console/security.js';
import { pageContext, sendPage, wantsPage } from './console/context.js';
import { errorPage } from './console/error-page.js';
import { formErrorPage } from './console/forms.js';
import type { ValidationErrorItem } from '../http/validation.js';

/** The admin API description version (spec §9). */
export const ADMIN_API_VERSION = '1.0.0rc13';

export interface AdminAppOptions {
  /** Sees every route as it is registered (the OpenAPI coverage test lists them with it). */
  onRoute?: (route: RouteOptions) => void;
}

export async function buildAdminApp(services: Services, opts: AdminAppOptions = {}): Promise<FastifyInstance> {
  const { config } = services;
  const app = createHttpServer({
    log: services.log.child({ listener: 'admin' }),
    bodyLimit: 1024 * 1024,
    headerBytes: config.gateway.limits.header_bytes,
    trustProxy: config.gateway.trust_proxy,
    idleTimeoutMs: config.gateway.timeouts.client_idle_ms,
    tracing: services.tracing,
    listener: 'admin',
    tls: { key: 'admin.tls', config: config.admin.tls },
  });
  if (opts.onRoute) app.addHook('onRoute', opts.onRoute);
  // Every admin response, console page or not (spec-independent hardening of the console: a strict CSP, no framing).
  app.addHook('onSend', (_req, reply, payload, done) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) reply.header(name, value);
    done(null, payload);
  });
  setAdminErrorHandler(app);
  registerHealthRoutes(app, services.readiness, { details: config.observability.readiness_details });
  // Spec §4: the redirect is an HTML answer (a tiny link body, so the content type is not dropped with an empty body).
  app.get('/', async (_req, reply) =>
    reply.code(302).header('location', '/dashboard/overview').type('text/html; charset=utf-8').send('<!doctype html><a href="/dashboard/overview">Overview</a>\n'),
  );
  const api = new ApiRegistry();
  for (const mod of adminModules) await mod({ app, api, services });
  app.get('/api/openapi.json', async () => api.openapi({ title: 'Gatehouse admin API', version: ADMIN_API_VERSION }));
  api.describe({ method: 'GET', url: '/health', summary: 'Liveness: 200 while the process is up', tags: ['health'] });
  api.describe({ method: 'GET', url: '/ready', summary: 'Readiness: 200 only when every dependency check passes, else 503; the body lists each check', tags: ['health'] });
  api.describe({ method: 'GET', url: '/', summary: 'Redirects to the overview page', tags: ['console'], successStatus: 302, produces: ['text/html'] });
  api.describe({ method: 'GET', url: '/api/openapi.json', summary: 'This document', tags: ['meta'] });
  return app;
}

/** Admin errors: `{detail}` bodies as the admin API describes them (DESIGN §5); validation errors carry the HTTPValidationError shape; repository errors are translated here, once for every route. */
export function setAdminErrorHandler(app: FastifyInstance): void {
  app.setNotFoundHandler(async (req, reply) => {
    if (isBrowserPage(req)) return sendPage(reply, errorPage(pageContext(req), 404, 'There is no page at this address.'), 404);
    return reply.code(404).send({ detail: 'Not found' });
  });
  app.setErrorHandler(async (raw, req, reply) => {
    const err = storeErrorAsHttp(raw) ?? jsonBodyErrorAsValidation(raw) ?? raw;
    if (isGatehouseError(err) && isBrowserPage(req)) {
      if (err.code === 'validation_failed' || err.code === 'conflict' || err.code === 'not_found') {
        // A console form posted by a browser: its page again, messages at the fields (a refused write's message
        // at the top), values kept; as registerConsoleForm answers its own forms.
        const invalid = err.code === 'validation_failed';
        const page = await formErrorPage(app, req, invalid ? ((err.details?.detail ?? []) as ValidationErrorItem[]) : [], invalid ? undefined : err.message);
        if (page) return sendPage(reply, page, err.spec.http);
      }
      if (err.code !== 'validation_failed') {
        if (err.retryAfterSeconds !== undefined) void reply.header('retry-after', String(err.retryAfterSeconds));
        return sendPage(reply, errorPage(pageContext(req), err.spec.http, err.message), err.spec.http);
      }
    }
    if (isGatehouseError(err)) {
      if (err.retryAfterSeconds !== undefined) void reply.header('retry-after', String(err.retryAfterSeconds));
      const body = err.code === 'validation_failed' && err.details?.detail ? { detail: err.details.detail } : { detail: err.message, code: err.code };
      return reply.code(err.spec.http).send(body);
    }
    const status = (err as { statusCode?: number }).statusCode;
    if (status === 413) return reply.code(413).send({ detail: errorRegistry.payload_too_large.message });
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.code(status === 415 ? 415 : 400).send({ detail: status === 415 ? 'Unsupported content type' : 'Malformed request' });
    }
    req.log.error({ err }, 'unhandled admin error');
    return reply.code(500).send({ detail: errorRegistry.internal.message });
  });
}

/** A browser (Accept names text/html) asking for a console page or posting a console form; never the JSON API, never a JSON caller. */
function isBrowserPage(req: FastifyRequest): boolean {
  return !req.url.startsWith('/api/') && wantsPage(req);
}

/** Fastify's JSON parser errors as the 422 validation shape (spec §4: invalid input gives 422), not a bare 400. */
function jsonBodyErrorAsValidation(err: unknown): GatehouseError | null {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'FST_ERR_CTP_INVALID_JSON_BODY') return malformedJsonError();
  if (code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return malformedJsonError(true);
  return null;
}
