// Test helpers for the policy API: the shared world's service and owner token behind a small Bearer client, and fixtures in the control store.
import { adminToken, startWorld, OWNER_PASSWORD } from '../support/world.js';
import { bearer, type Answer } from '../support/admin-client.js';
import type { TestService } from '../support/service.js';
import type { AdminAuditEvent } from '../../src/admin/audit-events.js';
import { createIdentity } from '../../src/store/repos/identities.js';
import { createDataSource } from '../../src/store/repos/data-sources.js';
import { createSourceRole } from '../../src/store/repos/source-roles.js';
import { createGrant } from '../../src/store/repos/grants.js';

export { OWNER_PASSWORD };

export class PolicyApi {
  constructor(
    readonly baseUrl: string,
    readonly token: string,
  ) {}

  send(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<Answer> {
    return bearer(this.baseUrl, this.token, method, path, body, contentType);
  }

  form(path: string, fields: Record<string, string>): Promise<Answer> {
    return this.send('POST', path, fields, 'application/x-www-form-urlencoded');
  }
}

/** Signs in (the bootstrap owner by default) and creates an admin API token (Bearer requests are CSRF-exempt). */
export async function ownerApi(baseUrl: string, username = 'admin', password = OWNER_PASSWORD): Promise<PolicyApi> {
  return new PolicyApi(baseUrl, await adminToken(baseUrl, username, password, 'policy-tests'));
}

/** A service, the owner's client, and every admin audit event the service records. */
export async function startPolicyService(env: Record<string, string> = {}): Promise<{ svc: TestService; api: PolicyApi; audits: AdminAuditEvent[] }> {
  const world = await startWorld({ env });
  return { svc: world.svc, api: new PolicyApi(world.svc.adminUrl, world.token), audits: world.audits };
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
