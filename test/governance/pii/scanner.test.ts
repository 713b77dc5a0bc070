// Scanner behaviour: markers and counts, deep key context, free-text fields, column globs, bounds failing closed, no mutation, text bodies and SQL rows.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createPiiScanner, piiOptionsFromConfig } from '../../../src/governance/pii/index.js';
import type { PiiDetector } from '../../../src/governance/pii/index.js';

const deepFreeze = <T>(v: T): T => {
  if (typeof v === 'object' && v !== null) {
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
    Object.freeze(v);
  }
  return v;
};

const record = () => ({
  id: 'cus_8f3k2',
  name: 'Order for Jane',
  contact: 'jane.doe@example.com',
  note: 'call +44 20 7946 0958 after 5pm',
  card: '4111 1111 1111 1111',
  created_at: '2024-05-01T12:00:00Z',
  tags: ['vip', 'from 203.0.113.9'],
  total: 129.5,
  count: 3,
});

describe('scanJson fast mode', () => {
  const scanner = createPiiScanner();

  it('replaces each detected value with its typed marker and counts by type', () => {
    const r = scanner.scanJson(record(), { mode: 'fast' });
    expect(r.value).toEqual({
      id: 'cus_8f3k2',
      name: 'Order for Jane',
      contact: '[REDACTED:email]',
      note: 'call [REDACTED:phone] after 5pm',
      card: '[REDACTED:card]',
      created_at: '2024-05-01T12:00:00Z',
      tags: ['vip', 'from [REDACTED:ip_address]'],
      total: 129.5,
      count: 3,
    });
    expect(r.redactions).toBe(4);
    expect(r.byType).toEqual({ email: 1, phone: 1, card: 1, ip_address: 1 });
    expect(r.failedClosed).toBe(false);
    expect(r.failures).toEqual([]);
    expect(r.mode).toBe('fast');
  });

  it('does not mutate the input and returns a deep copy with the key order kept', () => {
    const input = deepFreeze({ a: { b: [{ email: 'x@example.com' }] }, z: 1, m: 'ok' });
    const before = JSON.stringify(input);
    const r = scanner.scanJson(input, { mode: 'deep', redactColumns: ['m'] });
    expect(JSON.stringify(input)).toBe(before);
    expect(Object.keys(r.value as object)).toEqual(['a', 'z', 'm']);
    const copy = scanner.scanJson(input, { mode: 'off' }).value as typeof input;
    expect(copy).toEqual(input);
    expect(copy).not.toBe(input);
    expect(copy.a).not.toBe(input.a);
    expect(copy.a.b[0]).not.toBe(input.a.b[0]);
  });

  it('never mutates arbitrary JSON and mode off without columns returns an equal copy (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const before = JSON.stringify(v);
        const off = scanner.scanJson(v, { mode: 'off' });
        scanner.scanJson(v, { mode: 'deep' });
        expect(JSON.stringify(v)).toBe(before);
        expect(off.value).toEqual(v);
        expect(off.redactions).toBe(0);
      }),
      { numRuns: 200 },
    );
  });

  it('keeps a parsed __proto__ key as data and redacts inside it, without touching prototypes', () => {
    const input = JSON.parse('{"__proto__": {"contact": "a@example.com"}, "x": 1}') as object;
    const r = scanner.scanJson(input, { mode: 'fast' });
    expect(JSON.stringify(r.value)).toBe('{"__proto__":{"contact":"[REDACTED:email]"},"x":1}');
    expect(Object.getPrototypeOf(r.value)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).contact).toBeUndefined();
  });

  it('stops copying as soon as maxNodes is passed', () => {
    const scanner = createPiiScanner({ maxNodes: 1_000 });
    let reads = 0;
    const big = new Proxy(Array.from({ length: 1_000_000 }, (_, i) => i), {
      get(target, prop, receiver) {
        if (typeof prop === 'string' && /^\d+$/.test(prop)) reads++;
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    const r = scanner.scanJson(big, { mode: 'fast' });
    expect(r.value).toBe('[REDACTED:scan_failed]');
    expect(reads).toBeLessThanOrEqual(1_001);
  });

  it('redacts card numbers stored as JSON numbers, not other numbers', () => {
    const r = scanner.scanJson({ pan: 4111111111111111, order: 1234567890123, ts: 1700000000000, price: 12.5 }, { mode: 'fast' });
    expect(r.value).toEqual({ pan: '[REDACTED:card]', order: 1234567890123, ts: 1700000000000, price: 12.5 });
  });

  it('uses the key only as a hint for the AWS secret key in fast mode', () => {
    const secret = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
    const r = scanner.scanJson({ aws_secret_access_key: secret, sha1: 'da39a3ee5e6b4b0d3255bfef95601890afd80709', email: 'not an address' }, { mode: 'fast' });
    expect(r.value).toEqual({ aws_secret_access_key: '[REDACTED:aws_secret_key]', sha1: 'da39a3ee5e6b4b0d3255bfef95601890afd80709', email: 'not an address' });
  });

  it('scans a root string and passes other primitives through', () => {
    expect(scanner.scanJson('mail me: a.b@example.org', { mode: 'fast' }).value).toBe('mail me: [REDACTED:email]');
    expect(scanner.scanJson(null, { mode: 'fast' }).value).toBeNull();
    expect(scanner.scanJson(true, { mode: 'deep' }).value).toBe(true);
  });
});

describe('scanJson deep mode: key-name context', () => {
  const scanner = createPiiScanner();

  it.each([
    ['email', 'email'], ['E-Mail', 'email'], ['e_mail', 'email'], ['emailAddress', 'email'], ['customer_email', 'email'], ['emails', 'email'],
    ['ssn', 'ssn'], ['SOCIAL_SECURITY', 'ssn'], ['social-security-number', 'ssn'],
    ['dob', 'dob'], ['date_of_birth', 'dob'], ['birthDate', 'dob'], ['birthdate', 'dob'],
    ['phone', 'phone'], ['mobile', 'phone'], ['homePhone', 'phone'], ['phone_numbers', 'phone'],
    ['address', 'address'], ['street', 'address'], ['billingAddress', 'address'], ['addresses', 'address'],
    ['postcode', 'postcode'], ['zip', 'postcode'], ['ZIP_CODE', 'postcode'], ['postalCode', 'postcode'],
    ['passport', 'passport'], ['passport_number', 'passport'], ['national_id', 'national_id'], ['nationalId', 'national_id'],
    ['tax_id', 'tax_id'], ['taxId', 'tax_id'], ['iban', 'iban'], ['card_number', 'card'], ['cardNumber', 'card'],
    ['password', 'password'], ['user_password', 'password'], ['secret', 'secret'], ['client_secret', 'secret'],
    ['token', 'token'], ['access_token', 'token'], ['refreshToken', 'token'], ['api_key', 'api_key'], ['X-API-Key', 'api_key'], ['apiKey', 'api_key'],
    ['ip_address', 'ip_address'], ['first_name', 'name'], ['lastName', 'name'],
  ])('redacts the whole value under %s as [REDACTED:%s]', (key, type) => {
    const r = scanner.scanJson({ [key]: 'some value 1', other: 'keep' }, { mode: 'deep' });
    expect(r.value).toEqual({ [key]: `[REDACTED:${type}]`, other: 'keep' });
    expect(r.byType).toEqual({ [type]: 1 });
  });

  it.each(['page_token', 'nextPageToken', 'token_type', 'max_tokens', 'input_tokens', 'mac_address', 'name', 'status', 'zipper', 'gzip', 'automobile'])(
    'leaves %s alone',
    (key) => {
      expect(scanner.scanJson({ [key]: 'value 12' }, { mode: 'deep' }).value).toEqual({ [key]: 'value 12' });
    },
  );

  it('redacts numbers and whole objects or arrays under personal keys, not nulls, empties or flags', () => {
    const r = scanner.scanJson(
      { zip: 94107, address: { street: '1 Main St', city: 'Springfield' }, phones: ['+1 415 555 2671'], email: null, ssn: '', password: true, passport: [] },
      { mode: 'deep' },
    );
    expect(r.value).toEqual({ zip: '[REDACTED:postcode]', address: '[REDACTED:address]', phones: '[REDACTED:phone]', email: null, ssn: '', password: true, passport: [] });
    expect(r.redactions).toBe(3);
  });

  it('replaces whole values by key context only in deep mode; fast mode needs the value to have the named shape', () => {
    expect(scanner.scanJson({ dob: 'sometime in spring' }, { mode: 'fast' }).value).toEqual({ dob: 'sometime in spring' });
    expect(scanner.scanJson({ dob: 'sometime in spring' }, { mode: 'deep' }).value).toEqual({ dob: '[REDACTED:dob]' });
    expect(scanner.scanJson({ dob: '1980-02-01' }, { mode: 'fast' }).value).toEqual({ dob: '[REDACTED:dob]' });
  });

  it('still runs the validated detectors on other keys in deep mode', () => {
    expect(scanner.scanJson({ comment: 'IBAN DE89 3704 0044 0532 0130 00' }, { mode: 'deep' }).value).toEqual({ comment: 'IBAN [REDACTED:iban]' });
  });
});

describe('scanJson deep mode: free-text fields', () => {
  const scanner = createPiiScanner({ freeTextFields: ['notes', '*_comment', '$.tickets[*].body', '**.description'] });
  const text = 'Customer said: my SSN is 078051120, password: hunter2!, DOB 01/02/1980, phone 4155552671, mail x@example.com';
  const redacted = 'Customer said: my SSN is [REDACTED:ssn], password: [REDACTED:password], DOB [REDACTED:dob], phone [REDACTED:phone], mail [REDACTED:email]';

  it('scans configured fields with every detector, including phrase context', () => {
    const r = scanner.scanJson(
      { notes: text, agent_comment: text, tickets: [{ body: text, title: text }], a: { b: { description: text } }, body: text },
      { mode: 'deep' },
    );
    const v = r.value as Record<string, unknown>;
    expect(v.notes).toBe(redacted);
    expect(v.agent_comment).toBe(redacted);
    expect((v.tickets as Record<string, unknown>[])[0]!.body).toBe(redacted);
    expect((v.a as { b: { description: string } }).b.description).toBe(redacted);
    // Not configured: only the validated detectors run.
    expect((v.tickets as Record<string, unknown>[])[0]!.title).toBe(text.replace('x@example.com', '[REDACTED:email]'));
    expect(v.body).toBe(text.replace('x@example.com', '[REDACTED:email]'));
  });

  it('does not run phrase context in fast mode', () => {
    expect(scanner.scanJson({ notes: 'password: hunter2' }, { mode: 'fast' }).value).toEqual({ notes: 'password: hunter2' });
  });

  it('bounds free-text fields like any string', () => {
    const small = createPiiScanner({ freeTextFields: ['notes'], maxStringLength: 64 });
    const r = small.scanJson({ notes: 'x'.repeat(65), ok: 'short' }, { mode: 'deep' });
    expect(r.value).toEqual({ notes: '[REDACTED:scan_failed]', ok: 'short' });
    expect(r.failedClosed).toBe(true);
  });
});

describe('column redaction', () => {
  const scanner = createPiiScanner();

  it('redacts matching keys at any depth, case-insensitively, with globs, in every mode', () => {
    const doc = { Salary: 100, user: { salary_band: 'B', SSN_hash: 'abc', name: 'x' }, list: [{ salary: 1 }] };
    for (const mode of ['off', 'fast', 'deep'] as const) {
      const r = scanner.scanJson(doc, { mode, redactColumns: ['salary*', '*_HASH'] });
      expect(r.value).toEqual({
        Salary: '[REDACTED:column]',
        user: { salary_band: '[REDACTED:column]', SSN_hash: '[REDACTED:column]', name: 'x' },
        list: [{ salary: '[REDACTED:column]' }],
      });
      expect(r.byType).toEqual({ column: 4 });
    }
  });

  it('matches a qualified pattern by its column part and supports ?', () => {
    const r = scanner.scanJson({ ssn: '1', sso: '2', ssx: '3' }, { mode: 'off', redactColumns: ['public.users.ssn', 'ss?'] });
    expect(r.value).toEqual({ ssn: '[REDACTED:column]', sso: '[REDACTED:column]', ssx: '[REDACTED:column]' });
    const exact = scanner.scanJson({ ssn: '1', ssn2: '2' }, { mode: 'off', redactColumns: ['users.ssn'] });
    expect(exact.value).toEqual({ ssn: '[REDACTED:column]', ssn2: '2' });
  });
});

describe('bounds and failures fail closed', () => {
  it('replaces a container nested deeper than maxDepth and names its path', () => {
    const scanner = createPiiScanner({ maxDepth: 2 });
    const r = scanner.scanJson({ a: { b: { c: { d: 1 } }, ok: 1 }, top: 'x' }, { mode: 'fast' });
    // The root container is depth 0, so depth 2 is the last one kept.
    expect(r.value).toEqual({ a: { b: { c: '[REDACTED:scan_failed]' }, ok: 1 }, top: 'x' });
    expect(r.failedClosed).toBe(true);
    expect(r.failures).toEqual(['$.a.b.c: nesting exceeds maxDepth (2)']);
    expect(r.byType).toEqual({ scan_failed: 1 });
  });

  it('replaces the whole document past maxNodes', () => {
    const scanner = createPiiScanner({ maxNodes: 10 });
    const r = scanner.scanJson({ items: Array.from({ length: 20 }, (_, i) => i) }, { mode: 'fast' });
    expect(r.value).toBe('[REDACTED:scan_failed]');
    expect(r.failedClosed).toBe(true);
    expect(r.failures[0]).toMatch(/maxNodes \(10\)/);
    expect(scanner.scanJson({ items: [1, 2, 3] }, { mode: 'fast' }).failedClosed).toBe(false);
  });

  it('replaces a string longer than maxStringLength (UTF-8 bytes)', () => {
    const scanner = createPiiScanner({ maxStringLength: 10 });
    const r = scanner.scanJson({ a: ['ok', 'ééééé!', 'fine'] }, { mode: 'fast' });
    expect(r.value).toEqual({ a: ['ok', '[REDACTED:scan_failed]', 'fine'] });
    expect(r.failures).toEqual(['$.a[1]: string exceeds maxStringLength (10 bytes)']);
  });

  it('replaces the field whose detector throws, and only that field', () => {
    const boom: PiiDetector = {
      type: 'boom',
      find(text) {
        if (text.includes('explode')) throw new RangeError('detector bug with secret input');
      },
    };
    const scanner = createPiiScanner({ detectors: [boom] });
    const r = scanner.scanJson({ 'weird key': 'please explode', b: 'a@example.com' }, { mode: 'fast' });
    expect(r.value).toEqual({ 'weird key': '[REDACTED:scan_failed]', b: '[REDACTED:email]' });
    expect(r.failures).toEqual(['$["weird key"]: detector failed (RangeError)']);
    const t = scanner.scanText('please explode a@example.com', { mode: 'fast' });
    expect(t.text).toBe('[REDACTED:scan_failed]');
    expect(t.failedClosed).toBe(true);
  });

  it('walks very deep documents iteratively without overflowing the stack', () => {
    let v: unknown = 'a@example.com';
    for (let i = 0; i < 100_000; i++) v = [v];
    const scanner = createPiiScanner({ maxDepth: 200_000, maxNodes: 200_000 });
    const r = scanner.scanJson(v, { mode: 'fast' });
    expect(r.redactions).toBe(1);
    let out = r.value;
    for (let i = 0; i < 100_000; i++) out = (out as unknown[])[0];
    expect(out).toBe('[REDACTED:email]');
    const bounded = createPiiScanner().scanJson(v, { mode: 'fast' });
    expect(bounded.failedClosed).toBe(true);
  });

  it('rejects invalid options and modes as caller errors', () => {
    expect(() => createPiiScanner({ maxDepth: -1 })).toThrow(TypeError);
    expect(() => createPiiScanner().scanJson({}, { mode: 'loud' as never })).toThrow(TypeError);
  });
});

describe('scanText', () => {
  const scanner = createPiiScanner();
  const body = 'From: a@example.com\nAuthorization: Bearer 9oJlsd7DkHEKnBRb2-i7gu2b8aMR9KnS\nSSN: 078051120\nplain line';

  it('redacts validated detectors in fast mode and adds phrase context in deep mode', () => {
    const fast = scanner.scanText(body, { mode: 'fast' });
    expect(fast.text).toBe('From: [REDACTED:email]\nAuthorization: Bearer [REDACTED:bearer_token]\nSSN: 078051120\nplain line');
    expect(fast.redactions).toBe(2);
    const deep = scanner.scanText(body, { mode: 'deep' });
    expect(deep.text).toBe('From: [REDACTED:email]\nAuthorization: Bearer [REDACTED:bearer_token]\nSSN: [REDACTED:ssn]\nplain line');
    expect(deep.byType).toEqual({ email: 1, bearer_token: 1, ssn: 1 });
    expect(scanner.scanText(body, { mode: 'off' })).toMatchObject({ text: body, redactions: 0, failedClosed: false });
  });

  it('replaces a body over maxTextBytes', () => {
    const small = createPiiScanner({ maxTextBytes: 16 });
    const r = small.scanText('a'.repeat(17), { mode: 'fast' });
    expect(r).toMatchObject({ text: '[REDACTED:scan_failed]', failedClosed: true, redactions: 1 });
    expect(r.failures[0]).toMatch(/maxTextBytes/);
    expect(small.scanText('a'.repeat(17), { mode: 'off' }).text).toBe('a'.repeat(17));
  });
});

describe('redactRow', () => {
  const scanner = createPiiScanner({ freeTextFields: ['notes'] });
  const columns = ['id', 'Email', 'ssn_hash', 'notes', 'comment', 'dob'];
  const values = ['7', 'jane@example.com', 'abc', 'pwd: hunter2', 'call 415-555-2671', null];

  it('applies column globs in every mode and leaves nulls', () => {
    const r = scanner.redactRow(columns, values, { mode: 'off', redactColumns: ['*_HASH', 'dob'] });
    expect(r.values).toEqual(['7', 'jane@example.com', '[REDACTED:column]', 'pwd: hunter2', 'call 415-555-2671', null]);
    expect(r.redactions).toBe(1);
  });

  it('runs detectors on text values in fast mode', () => {
    const r = scanner.redactRow(columns, values, { mode: 'fast' });
    expect(r.values).toEqual(['7', '[REDACTED:email]', 'abc', 'pwd: hunter2', 'call [REDACTED:phone]', null]);
    expect(r.byType).toEqual({ email: 1, phone: 1 });
  });

  it('uses column names as key context and free-text columns in deep mode', () => {
    const r = scanner.redactRow(columns, ['7', 'not-an-address', 'abc', 'pwd: hunter2', 'x', '1980-01-01'], { mode: 'deep' });
    expect(r.values).toEqual(['7', '[REDACTED:email]', 'abc', 'pwd: [REDACTED:password]', 'x', '[REDACTED:dob]']);
    expect(r.byType).toEqual({ email: 1, password: 1, dob: 1 });
  });

  it('compiles once per result set with rowRedactor and checks the row width', () => {
    const redact = scanner.rowRedactor(['a', 'b'], { mode: 'fast', redactColumns: ['b'] });
    expect(redact(['x@example.com', 'y']).values).toEqual(['[REDACTED:email]', '[REDACTED:column]']);
    expect(redact(['z', null]).values).toEqual(['z', null]);
    expect(() => redact(['only one'])).toThrow(TypeError);
  });

  it('fails a too-long value closed', () => {
    const small = createPiiScanner({ maxStringLength: 4 });
    const r = small.redactRow(['a', 'b'], ['12345', 'ok'], { mode: 'fast' });
    expect(r.values).toEqual(['[REDACTED:scan_failed]', 'ok']);
    expect(r.failures).toEqual(['column "a": string exceeds maxStringLength (4 bytes)']);
  });
});

describe('configuration', () => {
  it('maps the pii section and degrades disabled modes', () => {
    const opts = piiOptionsFromConfig({ fast_enabled: true, deep_enabled: false, free_text_fields: ['notes'], max_depth: 5, max_nodes: 50, max_string_bytes: 100 });
    expect(opts).toEqual({ fastEnabled: true, deepEnabled: false, freeTextFields: ['notes'], maxDepth: 5, maxNodes: 50, maxStringLength: 100 });
    const scanner = createPiiScanner(opts);
    const r = scanner.scanJson({ email: 'x', other: 'a@example.com' }, { mode: 'deep' });
    expect(r.mode).toBe('fast');
    expect(r.value).toEqual({ email: 'x', other: '[REDACTED:email]' });
    const none = createPiiScanner({ fastEnabled: false, deepEnabled: false });
    const n = none.scanJson({ other: 'a@example.com', pw: 's' }, { mode: 'deep', redactColumns: ['pw'] });
    expect(n.mode).toBe('off');
    expect(n.value).toEqual({ other: 'a@example.com', pw: '[REDACTED:column]' });
  });
});
