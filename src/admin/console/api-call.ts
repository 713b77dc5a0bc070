// Console forms act through the admin JSON API in-process (one validation, one permission check and one audit entry per action, whichever door it came through): the browser's session, CSRF token and address go along.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { GatehouseError } from '../../errors/registry.js';
import { validationError, type ValidationErrorItem } from '../../http/validation.js';
import { sessionOf } from '../auth/guard.js';

export interface ApiAnswer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

/** Calls an admin API route as the signed-in admin of `req` (same session, same client address in the audit entry). */
export async function callApi(app: FastifyInstance, req: FastifyRequest, method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, json?: unknown): Promise<ApiAnswer> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (req.headers.cookie) headers.cookie = req.headers.cookie;
  if (req.headers.authorization) headers.authorization = req.headers.authorization;
  const csrf = sessionOf(req)?.record.csrf_token;
  if (csrf) headers['x-csrf-token'] = csrf;
  if (json !== undefined) headers['content-type'] = 'application/json';
  const res = await app.inject({ method, url, headers, remoteAddress: req.ip, ...(json !== undefined ? { payload: JSON.stringify(json) } : {}) });
  return { status: res.statusCode, json: parseBody(res.body) };
}

/**
 * A 2xx answer's body; anything else as the error the console shows: 422 with its items (the form puts them at
 * the fields), 404/409 as the form's message, the rest as an error page. `fieldOf` names the form field of a JSON
 * body path (e.g. ["connection_config", "base_url"] is the form's `base_url`); by default its first step.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function okOrThrow(answer: ApiAnswer, fieldOf: (path: Array<string | number>) => string = (p) => String(p[0])): any {
  if (answer.status >= 200 && answer.status < 300) return answer.json;
  const detail = answer.json?.detail;
  if (answer.status === 422 && Array.isArray(detail)) {
    const items = (detail as ValidationErrorItem[]).map((d) => (d.loc[0] === 'body' && d.loc.length > 1 ? { ...d, loc: ['body', fieldOf(d.loc.slice(1))] } : d));
    throw validationError(items);
  }
  const message = typeof detail === 'string' ? detail : 'The request failed.';
  const code = answer.status === 404 ? 'not_found' : answer.status === 409 ? 'conflict' : answer.status === 403 ? 'forbidden' : answer.status === 503 ? 'store_unavailable' : answer.status === 429 ? 'rate_limited' : 'internal';
  throw new GatehouseError(code, message);
}

function parseBody(text: string): unknown {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}
