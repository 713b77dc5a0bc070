// Secret reference fields (`*_ref`): each bad form fails start-up through the CLI naming the key and never echoing a value; in-process, every field × every form, resolution, and masking.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadConfig, maskedConfig, secretRefPaths } from '../../src/config/index.js';
import { configCheck, expectConfigFailure, setIn, tempDirs, writeYaml } from './helpers.js';

const dir = tempDirs();

/** A bad reference form, set up in `cwd`: the reference, the variables it needs, the secrets that must not leak, and the expected message. */
interface BadForm {
  name: string;
  setup: (cwd: string) => { ref: string; vars: Record<string, string>; secrets: string[] };
  message: RegExp;
}

const badForms: BadForm[] = [
  {
    name: 'a literal secret value',
    setup: () => ({ ref: 'literal-secret-value-0123456789abcdef', vars: {}, secrets: ['literal-secret-value-0123456789abcdef'] }),
    message: /is not a secret reference/,
  },
  {
    name: 'env: naming an unset variable',
    setup: () => ({ ref: 'env:GH_UNSET_SECRET', vars: {}, secrets: [] }),
    message: /environment variable GH_UNSET_SECRET is not set/,
  },
  {
    name: 'env: naming a variable set to an empty string',
    setup: () => ({ ref: 'env:GH_EMPTY_SECRET', vars: { GH_EMPTY_SECRET: '' }, secrets: [] }),
    message: /environment variable GH_EMPTY_SECRET is empty/,
  },
  {
    name: 'file: to a missing file',
    setup: (cwd) => ({ ref: `file:${path.join(cwd, 'missing-secret')}`, vars: {}, secrets: [] }),
    message: /cannot be read/,
  },
  {
    name: 'file: to an empty file',
    setup: (cwd) => {
      writeFileSync(path.join(cwd, 'empty-secret'), '\n');
      return { ref: `file:${path.join(cwd, 'empty-secret')}`, vars: {}, secrets: [] };
    },
    message: /is empty/,
  },
  {
    name: 'file: with a relative path',
    setup: (cwd) => {
      // The file exists relative to the working directory: a relative reference must still be refused.
      mkdirSync(path.join(cwd, 'secrets'), { recursive: true });
      writeFileSync(path.join(cwd, 'secrets', 'key'), 'relative-file-secret-0123456789abc');
      return { ref: 'file:secrets/key', vars: {}, secrets: ['relative-file-secret-0123456789abc'] };
    },
    message: /needs an absolute path/,
  },
];

/** Extra settings a field needs so that the only problem is the reference itself. */
const context: Partial<Record<string, Record<string, unknown>>> = {
  'notifications.slack_bot_token_ref': { 'notifications.slack_channel': '#approvals' },
};

const envName = (keyPath: string) => `SERVICE_${keyPath.toUpperCase().replaceAll('.', '__')}`;

// Each form once through the CLI, rotating over the fields so that every *_ref field is exercised here too.
const cliCases: Array<{ form: BadForm; field: string; via: 'yaml' | 'env' }> = [
  { form: badForms[0]!, field: 'admin.signing_secret_ref', via: 'env' },
  { form: badForms[1]!, field: 'auth.api_key_pepper_ref', via: 'yaml' },
  { form: badForms[2]!, field: 'auth.oidc.admin_client_secret_ref', via: 'yaml' },
  { form: badForms[3]!, field: 'notifications.slack_bot_token_ref', via: 'yaml' },
  { form: badForms[4]!, field: 'notifications.slack_webhook_url_ref', via: 'env' },
  { form: badForms[5]!, field: 'approvals.encryption_key_ref', via: 'yaml' },
];

describe('bad secret references through `gatehouse config check`', () => {
  it('the CLI cases cover every *_ref field of the schema', () => {
    expect(new Set(cliCases.map((c) => c.field))).toEqual(new Set(secretRefPaths));
  });

  for (const { form, field, via } of cliCases) {
    it(`${field}: ${form.name} (from ${via === 'env' ? envName(field) : 'YAML'})`, async () => {
      const cwd = dir();
      const { ref, vars, secrets } = form.setup(cwd);
      const tree: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(context[field] ?? {})) setIn(tree, k, v);
      if (via === 'yaml') setIn(tree, field, ref);
      else vars[envName(field)] = ref;
      writeYaml(cwd, tree);
      const result = await configCheck({ cwd, vars });
      expectConfigFailure(result, field, { count: 1, secrets });
      expect(result.stderr).toMatch(form.message);
    });
  }
});

describe('secret references in-process', () => {
  const load = (cwd: string, tree: Record<string, unknown>, env: Record<string, string>) => {
    writeYaml(cwd, tree);
    return loadConfig({ env, cwd });
  };

  for (const field of secretRefPaths) {
    for (const form of badForms) {
      for (const via of ['yaml', 'env'] as const) {
        it(`${field} refuses ${form.name} (${via})`, () => {
          const cwd = dir();
          const { ref, vars, secrets } = form.setup(cwd);
          const tree: Record<string, unknown> = {};
          for (const [k, v] of Object.entries(context[field] ?? {})) setIn(tree, k, v);
          if (via === 'yaml') setIn(tree, field, ref);
          else vars[envName(field)] = ref;
          const r = load(cwd, tree, vars);
          expect(r.ok).toBe(false);
          if (r.ok) return;
          expect(r.problems).toEqual([expect.stringMatching(new RegExp(`^${field.replaceAll('.', '\\.')}: `))]);
          expect(r.problems[0]).toMatch(form.message);
          for (const s of secrets) expect(r.problems.join('\n')).not.toContain(s);
        });
      }
    }
  }

  it('a whitespace-only variable is empty; a malformed env: name is refused without echo', () => {
    const cwd = dir();
    const blank = load(cwd, { admin: { signing_secret_ref: 'env:GH_BLANK' } }, { GH_BLANK: '   ' });
    expect(blank.ok || blank.problems).toEqual(['admin.signing_secret_ref: environment variable GH_BLANK is empty']);
    const malformed = load(cwd, { admin: { signing_secret_ref: 'env:not a name but a secret' } }, {});
    expect(malformed.ok || malformed.problems).toEqual([expect.stringMatching(/^admin\.signing_secret_ref: env: reference needs a valid/)]);
    expect(malformed.ok || malformed.problems[0]).not.toContain('a secret');
  });

  it('file: to a directory is refused', () => {
    const cwd = dir();
    const r = load(cwd, { approvals: { encryption_key_ref: `file:${cwd}` } }, {});
    expect(r.ok || r.problems).toEqual([expect.stringMatching(/^approvals\.encryption_key_ref: .* is not a regular file/)]);
  });

  it('good references resolve: env: as is, file: without its final newline; Secrets never prints a value', () => {
    const cwd = dir();
    writeFileSync(path.join(cwd, 'pepper'), 'file-pepper-0123456789abcdefghijkl\n');
    const r = load(
      cwd,
      { admin: { signing_secret_ref: 'env:GH_SIGNING' }, auth: { api_key_pepper_ref: `file:${path.join(cwd, 'pepper')}` } },
      { GH_SIGNING: 'env-signing-0123456789abcdefghijkl' },
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.secrets.get('admin.signing_secret_ref')).toBe('env-signing-0123456789abcdefghijkl');
    expect(r.secrets.get('auth.api_key_pepper_ref')).toBe('file-pepper-0123456789abcdefghijkl');
    const shown = `${JSON.stringify(r.secrets)} ${inspect(r.secrets)} ${JSON.stringify(maskedConfig(r.config))}`;
    expect(shown).not.toContain('env-signing');
    expect(shown).not.toContain('file-pepper');
  });

  it('admin.bootstrap_password takes a literal (masked when printed) or a reference (checked like the others)', () => {
    const cwd = dir();
    const literal = load(cwd, {}, { SERVICE_ADMIN__BOOTSTRAP_PASSWORD: 'Literal-Bootstrap-Pw-1234' });
    expect(literal.ok).toBe(true);
    if (literal.ok) {
      expect(literal.secrets.get('admin.bootstrap_password')).toBe('Literal-Bootstrap-Pw-1234');
      expect(JSON.stringify(maskedConfig(literal.config))).not.toContain('Literal-Bootstrap-Pw-1234');
    }
    const ref = load(cwd, { admin: { bootstrap_password: 'env:GH_BOOT' } }, { GH_BOOT: 'Referenced-Bootstrap-Pw-99' });
    expect(ref.ok && ref.secrets.get('admin.bootstrap_password')).toBe('Referenced-Bootstrap-Pw-99');
    const bad = load(cwd, { admin: { bootstrap_password: 'env:GH_BOOT_UNSET' } }, {});
    expect(bad.ok || bad.problems).toEqual(['admin.bootstrap_password: environment variable GH_BOOT_UNSET is not set']);
  });

  it('masking: URL passwords (userinfo and query) in every URL field, and the deprecated literal webhook URL', () => {
    const cwd = dir();
    const r = load(cwd, {}, {
      SERVICE_DATABASE__URL: 'postgres://gh:Db-Userinfo-Pw-123@db.internal/gh?password=Db-Query-Pw-456&application_name=gatehouse',
      SERVICE_REDIS__URL: 'rediss://default:Redis-Pw-789abc@redis.internal:6380/2',
      SERVICE_OBSERVABILITY__OTLP_ENDPOINT: 'https://collector:Otlp-Pw-135790@otel.internal/v1',
      SERVICE_NOTIFICATIONS__SLACK_WEBHOOK_URL: 'https://hooks.slack.com/services/T0/B0/Webhook-Secret-2468',
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.warnings).toEqual([expect.stringMatching(/^notifications\.slack_webhook_url: deprecated/)]);
    const masked = maskedConfig(r.config) as { database: { url: string }; redis: { url: string } };
    const text = JSON.stringify(masked);
    for (const s of ['Db-Userinfo-Pw-123', 'Db-Query-Pw-456', 'Redis-Pw-789abc', 'Otlp-Pw-135790', 'Webhook-Secret-2468']) expect(text).not.toContain(s);
    expect(masked.database.url).toBe('postgres://gh:****@db.internal/gh?password=****&application_name=gatehouse');
    expect(masked.redis.url).toBe('rediss://default:****@redis.internal:6380/2');
    // The configuration itself keeps the real values for the code that connects.
    expect(r.config.database.url).toContain('Db-Userinfo-Pw-123');
  });
});
