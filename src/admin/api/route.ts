// Admin API route definitions: one declaration validates params, query and body with zod (422 on failure) and feeds the OpenAPI document.
import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler } from 'fastify';
import { z } from 'zod';
import { validationError, validationItems, type ValidationErrorItem } from '../../http/validation.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface RouteSpec<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> {
  method: HttpMethod;
  url: string;
  summary: string;
  tags?: string[];
  params?: P;
  query?: Q;
  body?: B;
  /** Schema of the 2xx body, for the OpenAPI document. */
  response?: z.ZodType;
  successStatus?: number;
  preHandler?: preHandlerHookHandler | preHandlerHookHandler[];
  handler: (input: { params: z.output<P>; query: z.output<Q>; body: z.output<B>; req: FastifyRequest; reply: FastifyReply }) => Promise<unknown>;
}

interface RecordedRoute {
  method: HttpMethod;
  url: string;
  summary: string;
  tags: string[];
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  response?: z.ZodType;
  successStatus: number;
  /** Media types of a 2xx body that is not one JSON document (a streamed export, a page). */
  produces?: string[];
  /** Media types of the request body when it is not JSON (console forms). */
  consumes?: string[];
}

/** A route whose handler is registered elsewhere (it streams, or lives outside admin/): described here so the document lists it. */
export interface DescribedRoute {
  method: HttpMethod;
  url: string;
  summary: string;
  tags?: string[];
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
  response?: z.ZodType;
  successStatus?: number;
  produces?: string[];
  consumes?: string[];
}

/** Collects route declarations so the OpenAPI document is generated from the very schemas that validate. */
export class ApiRegistry {
  readonly routes: RecordedRoute[] = [];

  route<P extends z.ZodType = z.ZodUndefined, Q extends z.ZodType = z.ZodUndefined, B extends z.ZodType = z.ZodUndefined>(
    app: FastifyInstance,
    spec: RouteSpec<P, Q, B>,
  ): void {
    const recorded: RecordedRoute = { method: spec.method, url: spec.url, summary: spec.summary, tags: spec.tags ?? [], successStatus: spec.successStatus ?? 200 };
    if (spec.params) recorded.params = spec.params;
    if (spec.query) recorded.query = spec.query;
    if (spec.body) recorded.body = spec.body;
    if (spec.response) recorded.response = spec.response;
    this.routes.push(recorded);
    app.route({
      method: spec.method,
      url: spec.url,
      ...(spec.preHandler ? { preHandler: spec.preHandler } : {}),
      handler: async (req, reply) => {
        // Every part is checked before any is reported, so one 422 lists every problem of the request.
        const items: ValidationErrorItem[] = [];
        const parse = <S extends z.ZodType>(schema: S | undefined, where: 'path' | 'query' | 'body', value: unknown): z.output<S> => {
          if (!schema) return undefined as z.output<S>;
          const r = schema.safeParse(where === 'body' && value === undefined ? undefined : value);
          if (r.success) return r.data;
          items.push(...validationItems(where, r.error, value));
          return undefined as z.output<S>;
        };
        const params = parse(spec.params, 'path', req.params);
        const query = parse(spec.query, 'query', req.query);
        const body = parse(spec.body, 'body', req.body);
        if (items.length > 0) throw validationError(items);
        const result = await spec.handler({ params, query, body, req, reply });
        if (reply.sent) return reply;
        return reply.code(spec.successStatus ?? 200).send(result);
      },
    });
  }

  /** Adds a route registered directly on fastify to the document, from the schemas its handler validates with. */
  describe(route: DescribedRoute): void {
    const recorded: RecordedRoute = { method: route.method, url: route.url, summary: route.summary, tags: route.tags ?? [], successStatus: route.successStatus ?? 200 };
    if (route.params) recorded.params = route.params;
    if (route.query) recorded.query = route.query;
    if (route.body) recorded.body = route.body;
    if (route.response) recorded.response = route.response;
    if (route.produces) recorded.produces = route.produces;
    if (route.consumes) recorded.consumes = route.consumes;
    this.routes.push(recorded);
  }

  /** The OpenAPI 3.1 document served at /api/openapi.json. */
  openapi(info: { title: string; version: string }): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    const toJson = (s: z.ZodType) => z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' });
    for (const r of this.routes) {
      const oapiPath = r.url.replace(/:([A-Za-z_]+)/g, '{$1}');
      const op: Record<string, unknown> = { summary: r.summary, tags: r.tags, responses: {} as Record<string, unknown> };
      const parameters: unknown[] = [];
      for (const [where, schema] of [['path', r.params], ['query', r.query]] as const) {
        if (!schema) continue;
        const json = toJson(schema) as { properties?: Record<string, unknown>; required?: string[] };
        for (const [name, prop] of Object.entries(json.properties ?? {})) {
          parameters.push({ name, in: where, required: where === 'path' || (json.required ?? []).includes(name), schema: prop });
        }
      }
      if (parameters.length > 0) op.parameters = parameters;
      if (r.body) {
        const schema = toJson(r.body);
        op.requestBody = { required: true, content: Object.fromEntries((r.consumes ?? ['application/json']).map((type) => [type, { schema }])) };
      }
      const responses = op.responses as Record<string, unknown>;
      responses[String(r.successStatus)] = r.produces
        ? { description: 'Success', content: Object.fromEntries(r.produces.map((type) => [type, {}])) }
        : r.response
        ? { description: 'Success', content: { 'application/json': { schema: z.toJSONSchema(r.response, { io: 'output', unrepresentable: 'any' }) } } }
        : { description: 'Success' };
      if (r.params || r.query || r.body) responses['422'] = { description: 'Validation Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/HTTPValidationError' } } } };
      (paths[oapiPath] ??= {})[r.method.toLowerCase()] = op;
    }
    return {
      openapi: '3.1.0',
      info,
      paths,
      components: {
        schemas: {
          ValidationError: {
            type: 'object',
            required: ['loc', 'msg', 'type'],
            properties: { loc: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'integer' }] } }, msg: { type: 'string' }, type: { type: 'string' }, ctx: { type: 'object' }, input: {} },
          },
          HTTPValidationError: { type: 'object', properties: { detail: { type: 'array', items: { $ref: '#/components/schemas/ValidationError' } } } },
        },
      },
    };
  }
}

/** A path id that must be an integer: non-integers give 422 with loc ["path", name] (spec §4). */
export const intId = z.coerce.number({ error: 'Input should be a valid integer' }).int('Input should be a valid integer').min(1).max(2_147_483_647);
