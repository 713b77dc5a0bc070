// Scanning HTTP bodies by media type: a body the scan leaves as it was is returned without a copy, and only then.
import { describe, expect, it } from 'vitest';
import { createPiiScanner, scanBody } from '../../../src/governance/pii/index.js';

const scanner = createPiiScanner();
const opts = { mode: 'fast' as const, redactColumns: [] };

function scanned(body: Buffer, contentType: string) {
  const r = scanBody(scanner, body, contentType, opts);
  if (r.kind !== 'scanned') throw new Error(`unscannable: ${r.reason}`);
  return r;
}

describe('scanBody', () => {
  it('returns the body itself when the scan changes nothing', () => {
    const body = Buffer.from(JSON.stringify({ id: 7, items: ['a', 'b'], note: 'nothing personal' }));
    const r = scanned(body, 'application/json');
    expect(r.redactions).toBe(0);
    expect(r.body).toBe(body);
  });

  it('returns new bytes when the scan redacts, and never the original', () => {
    const body = Buffer.from(JSON.stringify({ contact: 'jane.doe@example.com' }));
    const r = scanned(body, 'application/json');
    expect(r.redactions).toBe(1);
    expect(r.body).not.toBe(body);
    expect(r.body.toString()).not.toContain('jane.doe@example.com');
  });

  it('re-serialises JSON whose text differs from its parsed form (whitespace, duplicate keys)', () => {
    // A duplicate key: JSON.parse keeps the last value, so the first is never scanned and must never leave.
    const body = Buffer.from('{"contact": "jane.doe@example.com", "contact": "x"}');
    const r = scanned(body, 'application/json');
    expect(r.body).not.toBe(body);
    expect(r.body.toString()).toBe('{"contact":"x"}');
  });

  it('never returns bytes that did not decode cleanly as UTF-8', () => {
    // An invalid byte decodes to U+FFFD: what the scan read is not the body, so the body is re-encoded from it.
    const body = Buffer.concat([Buffer.from('plain text '), Buffer.from([0xff, 0xfe]), Buffer.from(' end')]);
    const r = scanned(body, 'text/plain; charset=utf-8');
    expect(r.body).not.toBe(body);
    expect(r.body.equals(Buffer.from(body.toString('utf8')))).toBe(true);
  });

  it('re-encodes a body of another charset to UTF-8 even when nothing is redacted', () => {
    const body = Buffer.from('caf\xe9', 'latin1');
    const r = scanned(body, 'text/plain; charset=iso-8859-1');
    expect(r.body).not.toBe(body);
    expect(r.body.toString('utf8')).toBe('café');
    expect(r.contentType).toBe('text/plain; charset=utf-8');
  });
});
