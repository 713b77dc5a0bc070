// Personal data the scanner used to miss, class by class, each with near misses that must stay as they are: values as object keys, percent-encoded values in URLs, `00`-prefixed international numbers, cards with mixed separators, and bare values whose only context is the field name.
import { describe, expect, it } from 'vitest';
import { createPiiScanner } from '../../../src/governance/pii/index.js';

const scanner = createPiiScanner();
const fast = { mode: 'fast' as const };
const json = (v: unknown) => scanner.scanJson(v, fast).value;
const text = (t: string) => scanner.scanText(t, fast).text;

describe('values inside object keys', () => {
  it('redacts a key that is personal data, keeping its value', () => {
    expect(json({ 'jane.doe@example.com': { visits: 3 } })).toEqual({ '[REDACTED:email]': { visits: 3 } });
    expect(json({ byPhone: { '+44 20 7946 0958': 'mobile' } })).toEqual({ byPhone: { '[REDACTED:phone]': 'mobile' } });
    expect(json({ 'ssn 123-45-6789': true })).toEqual({ 'ssn [REDACTED:ssn]': true });
  });

  it('keeps keys apart when several redact to the same marker, and counts each', () => {
    const r = scanner.scanJson({ 'a@example.com': 1, 'b@example.com': 2, 'c@example.com': 3 }, fast);
    expect(r.value).toEqual({ '[REDACTED:email]': 1, '[REDACTED:email] (2)': 2, '[REDACTED:email] (3)': 3 });
    expect(r.byType.email).toBe(3);
  });

  it('still scans the value under a redacted key', () => {
    expect(json({ 'x@example.com': 'call +1 415 555 2671' })).toEqual({ '[REDACTED:email]': 'call [REDACTED:phone]' });
  });

  it('leaves ordinary keys alone (near misses)', () => {
    const v = { email: 1, user_email: 2, '2024-01-15': 3, 'v1.2.3.4': 4, 'icon@2x.png': 5, '550e8400-e29b-41d4-a716-446655440000': 6, 'order-1234-5678-9012': 7 };
    expect(json(v)).toEqual(v);
  });

  it('off mode leaves keys alone', () => {
    expect(scanner.scanJson({ 'a@example.com': 1 }, { mode: 'off' }).value).toEqual({ 'a@example.com': 1 });
  });
});

describe('values percent-encoded inside URLs', () => {
  it('finds them decoded and redacts the encoded span in place', () => {
    expect(text('https://api.example.com/u?email=jane.doe%40example.com&x=1')).toBe('https://api.example.com/u?email=[REDACTED:email]&x=1');
    expect(text('/lookup?ssn=123%2D45%2D6789')).toBe('/lookup?ssn=[REDACTED:ssn]');
    expect(text('tel=%2B44%2020%207946%200958')).toBe('tel=[REDACTED:phone]');
    expect(json({ next: 'https://x.example/?redirect=https%3A%2F%2Fy.example%2F%3Fmail%3Dann%2540example.org' })).toEqual({
      next: 'https://x.example/?redirect=https%3A%2F%2Fy.example%2F%3Fmail%3D[REDACTED:email]',
    });
  });

  it('leaves encoded near misses alone', () => {
    for (const t of ['https://cdn.example.com/icon%402x.png', '/v1/orders?from=2024%2D01%2D15', 'path=%2Fv1%2Forders%2F48213', 'q=100%25%20sure', 'a%20b%20c%20d']) {
      expect(text(t)).toBe(t);
    }
  });
});

describe('international numbers with the 00 prefix', () => {
  it('redacts them', () => {
    for (const p of ['0044 20 7946 0958', '0033 1 23 45 67 89', '0049-30-12345678', '001 415 555 2671', '0039 06 1234 5678']) {
      expect(text(`call ${p} today`)).toBe('call [REDACTED:phone] today');
    }
  });

  it('leaves near misses alone', () => {
    for (const t of ['0012 3456 7890', '0044 0532 0130 77', 'IBAN DE89 3704 0044 0532 0130', '00442079460958', '0028 1234 5678', 'batch 0049-30']) {
      expect(text(t)).toBe(t);
    }
  });
});

describe('card numbers with mixed separators', () => {
  it('redacts them in a printed card layout', () => {
    expect(text('card 4111 1111-1111 1111 ok')).toBe('card [REDACTED:card] ok');
    expect(text('card 3782-822463 10005 ok')).toBe('card [REDACTED:card] ok');
  });

  it('leaves other groupings and failed checksums alone', () => {
    for (const t of ['41 11-1111 1111 1111', '4111 1111-1111 1112', '4111-11 11 1111 1111', '1234 5678-9012 3456']) expect(text(t)).toBe(t);
  });
});

describe('bare values whose only context is the field name', () => {
  it('redacts them in fast mode when the value has the shape the name says', () => {
    expect(json({ ssn: '123456789' })).toEqual({ ssn: '[REDACTED:ssn]' });
    expect(json({ ssn: 123456789 })).toEqual({ ssn: '[REDACTED:ssn]' });
    expect(json({ customer_ssn: '078-05-1120' })).toEqual({ customer_ssn: '[REDACTED:ssn]' });
    expect(json({ phone: '4155552671' })).toEqual({ phone: '[REDACTED:phone]' });
    expect(json({ mobilePhone: 4155552671 })).toEqual({ mobilePhone: '[REDACTED:phone]' });
    expect(json({ dob: '1980-02-01' })).toEqual({ dob: '[REDACTED:dob]' });
    expect(json({ passport_number: 'X1234567' })).toEqual({ passport_number: '[REDACTED:passport]' });
    const row = scanner.redactRow(['id', 'ssn', 'phone'], ['42', '219099999', '+14155552671'], fast);
    expect(row.values).toEqual(['42', '[REDACTED:ssn]', '[REDACTED:phone]']);
  });

  it('leaves near misses alone', () => {
    const v = {
      ssn: '000000000', ssn_last4: '6789', ssn_count: 123456789, ssn_short: '12345678', phone: '12345', phone_verified: true, phones_total: 4155552671,
      dob: 'unknown', dob_year: 1980, passport: 'pending', hotel: '1234567', id: 123456789, zip: '12345', order_number: '4155552671',
    };
    expect(json(v)).toEqual(v);
  });
});
