// Address table through parseHostLiteral + classifyAddress: every numeric spelling of a blocked range is blocked; public addresses pass.
import { describe, expect, it } from 'vitest';
import { classifyAddress, parseHostLiteral } from '../../src/egress/address.js';
import { addressCases } from './address-table.js';

describe('address table', () => {
  it('has at least 60 rows with both outcomes', () => {
    expect(addressCases.length).toBeGreaterThanOrEqual(60);
    expect(addressCases.filter((c) => c.allowed).length).toBeGreaterThanOrEqual(10);
    expect(addressCases.filter((c) => !c.allowed).length).toBeGreaterThanOrEqual(50);
    expect(new Set(addressCases.map((c) => c.host)).size).toBe(addressCases.length);
  });

  it.each(addressCases.map((c) => [c.host, c] as const))('%s', (_host, c) => {
    const cls = classifyAddress(c.host);
    expect({ allowed: cls.allowed, range: cls.range, privateOverridable: cls.privateOverridable }).toEqual({
      allowed: c.allowed,
      range: c.range,
      privateOverridable: c.privateOverridable ?? false,
    });
    // Whatever WHATWG URL makes of the host, the classification of its normalized form is the same.
    if (c.urlValid !== false) {
      const normalized = new URL(`http://${c.host}/`).hostname;
      expect(classifyAddress(normalized)).toEqual(cls);
    } else {
      expect(() => new URL(`http://${c.host}/`)).toThrow();
    }
  });
});

describe('parseHostLiteral', () => {
  it('reads every IPv4 spelling as the address it reaches', () => {
    for (const h of ['2130706433', '0177.0.0.1', '0x7f.0.0.1', '0x7F000001', '127.1', '127.0.1', '0x7f.1', '0177.0x0.0.1', '127.0.0.1.', '１２７。0。0。1']) {
      expect(parseHostLiteral(h), h).toEqual({ kind: 'ipv4', address: '127.0.0.1' });
    }
  });

  it('refuses zone ids, bad brackets and numeric hosts that are not addresses', () => {
    expect(parseHostLiteral('[fe80::1%eth0]')).toEqual({ kind: 'invalid', reason: 'zone_id' });
    expect(parseHostLiteral('fe80::1%25eth0')).toEqual({ kind: 'invalid', reason: 'zone_id' });
    expect(parseHostLiteral('[::1')).toEqual({ kind: 'invalid', reason: 'malformed_ip' });
    expect(parseHostLiteral('[not:an:ip:zz]')).toEqual({ kind: 'invalid', reason: 'malformed_ip' });
    expect(parseHostLiteral('evil.com.2130706433')).toEqual({ kind: 'invalid', reason: 'malformed_ip' });
    expect(parseHostLiteral('')).toEqual({ kind: 'invalid', reason: 'empty' });
  });

  it('treats names as names (resolved, then each answer classified)', () => {
    expect(parseHostLiteral('API.Example.com')).toEqual({ kind: 'name', name: 'api.example.com' });
    expect(parseHostLiteral('0x7f.example.com')).toEqual({ kind: 'name', name: '0x7f.example.com' });
    expect(classifyAddress('localhost')).toMatchObject({ allowed: false, range: 'not_an_address' });
  });

  it('normalizes IPv6 with an embedded dotted quad correctly (::a.b.c.d is not ::ffff:a.b.c.d)', () => {
    expect(parseHostLiteral('::127.0.0.1')).toEqual({ kind: 'ipv6', address: '::7f00:1' });
    expect(parseHostLiteral('[::ffff:127.0.0.1]')).toEqual({ kind: 'ipv6', address: '::ffff:7f00:1' });
    expect(classifyAddress('::ffff:127.0.0.1').connectAddress).toBe('127.0.0.1');
  });
});
