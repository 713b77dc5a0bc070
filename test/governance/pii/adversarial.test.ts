// Prevents catastrophic backtracking: every detector stays near-linear on long adversarial inputs built from its own alphabet.
import { describe, expect, it } from 'vitest';
import { createPiiScanner } from '../../../src/governance/pii/index.js';

const N = 200_000;
const INPUTS: Record<string, string> = {
  digits: '1'.repeat(N),
  'digits and spaces': '12 '.repeat(N / 3),
  'digits and dashes': '123-'.repeat(N / 4),
  'dotted numbers': '1.2.'.repeat(N / 4),
  'plus and digits': '+1 '.repeat(N / 3),
  hex: 'a:b'.repeat(N / 3),
  'hex colons': 'ffff:'.repeat(N / 5),
  'at signs': 'a@'.repeat(N / 2),
  'local parts': 'a.'.repeat(N / 2) + '@',
  'domain labels': '@' + 'a.'.repeat(N / 2),
  'uppercase alnum': 'DE89'.repeat(N / 4),
  base64url: 'eyJ' + 'A'.repeat(N),
  'jwt dots': 'eyJhbGciOiJIUzI1NiJ9.' + 'a.'.repeat(N / 2),
  'keyword then spaces': 'ssn' + ' '.repeat(N) + 'x',
  'social security spaces': 'social security' + ' '.repeat(N) + 'x',
  'password then spaces': 'password' + ' '.repeat(N),
  'dob spaces': 'dob' + ' '.repeat(N) + '1',
  'bearer spaces': 'Bearer' + ' '.repeat(N) + '!',
  'pem without end': '-----BEGIN PRIVATE KEY-----' + 'A'.repeat(N),
  'repeated pem begins': '-----BEGIN RSA PRIVATE KEY-----'.repeat(N / 32),
  'secret words': 'secret='.repeat(N / 7),
};

describe('adversarial inputs', () => {
  const scanner = createPiiScanner({ maxStringLength: 4 * N, maxTextBytes: 4 * N });
  for (const [name, text] of Object.entries(INPUTS)) {
    it(`scans ${name} (${text.length} chars) in bounded time, both modes`, () => {
      const t0 = performance.now();
      scanner.scanText(text, { mode: 'fast' });
      scanner.scanText(text, { mode: 'deep' });
      const ms = performance.now() - t0;
      // Linear work on 200 k characters takes a few ms; quadratic backtracking would take minutes. Generous for a loaded CI box.
      expect(ms).toBeLessThan(2_000);
    });
  }

  it('redacts a PEM key without an END line to the end of the text', () => {
    const r = scanner.scanText('key: -----BEGIN PRIVATE KEY-----\nMIIEvQ', { mode: 'fast' });
    expect(r.text).toBe('key: [REDACTED:private_key]');
  });
});
