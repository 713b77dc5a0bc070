// Test helpers for the policy API: a service signed in as the bootstrap owner through an admin API token, and fixtures in the control store.
import { adminToken } from '../support/world.js';
import { startTestService, type TestService } from '../support/service.js';
import { createIdentity } from '../../src/store/repos/identities.js';
import { createDataSource } from '../../src/store/repos/data-sources.js';
import { createSourceRole } from '../../src/store/repos/source-roles.js';
import { createGrant } from '../../src/store/repos/grants.js';

export const OWNER_PASSWORD = 'policy-owner-password-1';

export interface Answer {
  status: number;
  text: string;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export class PolicyApi {
  constructor(
    readonly baseUrl: string,
    readonly token: string,
  ) {}

  async send(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    let payload: string | null = null;
    if (body !== undefined) {
      headers['content-type'] = contentType;
      payload = typeof body === 'string' ? body : contentType === 'application/x-www-form-urlencoded' ? new URLSearchParams(body as Record<string, string>).toString() : JSON.stringify(body);
    }
    const res = await fetch(this.baseUrl + path, { method, headers, body: payload, redirect: 'manual' });
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
    return { status: res.status, text, json };
  }

  form(path: string, fields: Record<string, string>): Promise<Answer> {
    return this.send('POST', path, fields, 'application/x-www-form-urlencoded');
  }
}

/** Signs in (the bootstrap owner by default) and creates an admin API token (Bearer requests are CSRF-exempt). */
export async function ownerApi(baseUrl: string, username = 'admin', password = OWNER_PASSWORD): Promise<PolicyApi> {
  const token = await adminToken(baseUrl, username, password, 'policy-tests');
  return new PolicyApi(baseUrl, token);
}

export async function startPolicyService(env: Record<string, string> = {}): Promise<{ svc: TestService; api: PolicyApi }> {
  const svc = await startTestService({ env: { SERVICE_ADMIN__BOOTSTRAP_PASSWORD: OWNER_PASSWORD, ...env } });
  try {
    return { svc, api: await ownerApi(svc.adminUrl) };
  } catch (err) {
    await svc.stop();
    throw err;
  }
}

export interface World {
  identityId: number;
  otherIdentityId: number;
}

/**
 * Two sources (`crm` HTTP, `warehouse` PostgreSQL) and two identities: `agent` holds reader on crm
 * (GET /v1/customers/**) and reader on warehouse (read on public.*); `stranger` holds nothing.
 */
export async function seedWorld(svc: TestService): Promise<World> {
  const db = svc.running.services.db;
  await createDataSource(db, { source_id: 'crm', name: 'CRM', source_type: 'http', connection_config: { base_url: 'https://crm.example' } });
  await createDataSource(db, { source_id: 'warehouse', name: 'Warehouse', source_type: 'postgres', connection_config: {} });
  const agent = await createIdentity(db, { name: 'agent', roles: ['support'], team: 'care' });
  const stranger = await createIdentity(db, { name: 'stranger', roles: ['support'] });
  const crmReader = await createSourceRole(db, { source_id: 'crm', role_key: 'reader', rules: { http: [{ methods: ['GET'], paths: ['/v1/customers/**'], approval: 'never' }], sql: [] } });
  const whReader = await createSourceRole(db, { source_id: 'warehouse', role_key: 'reader', rules: { http: [], sql: [{ operations: ['read'], tables: ['public.*'], approval: 'never' }] } });
  await createGrant(db, { identity_id: agent.id, source_id: 'crm', role_id: crmReader.id });
  await createGrant(db, { identity_id: agent.id, source_id: 'warehouse', role_id: whReader.id });
  return { identityId: agent.id, otherIdentityId: stranger.id };
}
