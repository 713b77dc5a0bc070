// Redaction by column type: a redacted SQL value stays a valid value of its type — the marker for text-like types, redacted-inside JSON for json/jsonb, NULL for everything else — so drivers' type parsers never meet `[REDACTED:ip_address]/24` in an inet.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createPiiScanner } from '../../../src/governance/pii/index.js';
import { redactAs, typedRowRedactor } from '../../../src/governance/pii/by-type.js';

const scanner = createPiiScanner();
const TEXT = 25;
const INET = 869;
const NUMERIC = 1700;
const JSONB = 3802;
const JSON_OID = 114;
const TEXT_ARRAY = 1009;

function redactor(typeOids: number[], opts: { redactColumns?: string[] } = {}) {
  const names = typeOids.map((_, i) => `c${i}`);
  return typedRowRedactor(typeOids, scanner.rowRedactor(names, { mode: 'fast', ...opts }), (doc) => scanner.scanJson(doc, { mode: 'fast', ...opts }));
}

describe('redactAs', () => {
  it.each([
    [25, 'marker'], [1043, 'marker'], [1042, 'marker'], [19, 'marker'],
    [114, 'json'], [3802, 'json'],
    [869, 'null'], [650, 'null'], [1700, 'null'], [20, 'null'], [2950, 'null'], [1009, 'null'], [142, 'null'], [17, 'null'], [1184, 'null'],
  ])('type %i is redacted as %s', (oid, form) => {
    expect(redactAs(oid)).toBe(form);
  });
});

describe('typedRowRedactor', () => {
  it('an inet, a numeric and a text[] holding personal data become NULL; text gets the marker', () => {
    const r = redactor([INET, NUMERIC, TEXT_ARRAY, TEXT])(['203.0.113.9/24', '4111111111111111', '{jane@example.com,x}', 'mail jane@example.com']);
    expect(r.values).toEqual([null, null, null, 'mail [REDACTED:email]']);
    expect(r.redactions).toBe(4);
  });

  it('values without personal data, and NULLs, pass through unchanged in every type', () => {
    const values = ['10', null, '{"a":1}', 'hello'];
    expect(redactor([NUMERIC, INET, JSONB, TEXT])(values).values).toEqual(values);
  });

  it('JSON is redacted inside and stays valid JSON, keys and structure kept', () => {
    const doc = { user: { email: 'jane@example.com', ip: '203.0.113.9' }, n: 4111111111111111, tags: ['ok'] };
    const [out] = redactor([JSONB])([JSON.stringify(doc)]).values;
    const parsed = JSON.parse(out!);
    expect(parsed).toEqual({ user: { email: '[REDACTED:email]', ip: '[REDACTED:ip_address]' }, n: '[REDACTED:card]', tags: ['ok'] });
  });

  it('a JSON column redacted whole by name is a JSON string of the marker', () => {
    const [out] = redactor([JSON_OID], { redactColumns: ['c0'] })(['{"a": 1}']).values;
    expect(JSON.parse(out!)).toBe('[REDACTED:column]');
  });

  it('when the JSON walk finds nothing the text scan found, the text-redacted value is sent as one JSON string, never the original', () => {
    // A walker that sees nothing stands for a match spanning JSON syntax, which the document walk cannot see.
    const blind = typedRowRedactor([JSONB], scanner.rowRedactor(['c0'], { mode: 'fast' }), (doc) => ({ value: doc, redactions: 0 }));
    const [out] = blind(['{"note": "mail jane@example.com"}']).values;
    expect(JSON.parse(out!)).toBe('{"note": "mail [REDACTED:email]"}');
  });

  it('whatever the values, every redacted JSON value parses and every non-text, non-JSON redacted value is NULL', () => {
    const pii = fc.constantFrom('jane@example.com', '203.0.113.9', '4111 1111 1111 1111', '+44 20 7946 0958', '123-45-6789', 'plain');
    const jsonDoc = fc.jsonValue().chain((v) => pii.map((p) => ({ v, p, arr: [p, v] })));
    fc.assert(
      fc.property(jsonDoc, pii, (doc, p) => {
        const r = redactor([JSONB, INET, TEXT])([JSON.stringify(doc), `${p}/24`, p]);
        expect(() => JSON.parse(r.values[0]!)).not.toThrow();
        expect(r.values[1] === null || r.values[1] === `${p}/24`).toBe(true);
        if (r.values[1] === null) expect(p).not.toBe('plain');
      }),
      { numRuns: 300 },
    );
  });
});
