// The identity page of the console shows the single sign-on mapping and edits it through the mapping API (422 at the field, removal, audit).
import { afterAll, beforeAll, expect, test } from 'vitest';
import { startWorld, OWNER_PASSWORD, type World } from '../support/world.js';
import { ConsoleClient, fieldError } from '../console/support/pages.js';

const ISSUER = 'https://idp.example.com/realms/gatehouse';
let world: World;

beforeAll(async () => {
  world = await startWorld({ env: { SERVICE_AUTH__OIDC__ISSUER_URL: ISSUER } });
});
afterAll(() => world.stop());

test('an identity page shows, sets and removes the mapping', async () => {
  const agent = await world.agent('console-mapped');
  const console = await ConsoleClient.signIn(world.svc.adminUrl, 'admin', OWNER_PASSWORD);
  const page = `/dashboard/access-control/identities/${agent.id}`;
  expect((await console.get(page)).text).toContain('not mapped');

  const empty = await console.post(`${page}/oidc`, { subject: '', email: '' });
  expect(empty.status).toBe(422);
  expect(fieldError(empty.text, 'subject')).toMatch(/required/);

  const saved = await console.post(`${page}/oidc`, { subject: 'console-client-1', email: 'agent@example.com' });
  expect(saved.status).toBe(303);
  const shown = (await console.get(page)).text;
  expect(shown).toContain(`console-client-1 (${ISSUER})`);
  expect(shown).toContain('agent@example.com');
  expect(world.audits.some((e) => e.action === 'oidc.agent_mapping.set' && e.target?.id === agent.id)).toBe(true);

  const removed = await console.post(`${page}/oidc/remove`, {});
  expect(removed.status).toBe(303);
  expect((await console.get(page)).text).toContain('not mapped');
});
