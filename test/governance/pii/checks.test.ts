// Table-driven tests of the validation rules behind the detectors: Luhn, issuer ranges, IBAN mod-97, SSN and IP ranges, JWT headers, key names.
import { describe, expect, it } from 'vitest';
import { cardNetwork, ibanValid, ipv4Valid, ipv6Valid, keyContextType, luhnValid, normalizeKey, ssnValid } from '../../../src/governance/pii/index.js';
import { jwtHeaderValid } from '../../../src/governance/pii/checks.js';

describe('validation rules', () => {
  it.each([
    ['4111111111111111', true], ['4111111111111112', false], ['378282246310005', true], ['0', true], ['79927398713', true], ['79927398710', false], ['12a4', false],
  ])('luhn(%s) = %s', (digits, ok) => expect(luhnValid(digits)).toBe(ok));

  it.each([
    ['4111111111111111', 'visa'], ['4222222222222', 'visa'], ['41111111111111', null], ['5555555555554444', 'mastercard'], ['2223003122003222', 'mastercard'],
    ['2721000000000000', null], ['378282246310005', 'amex'], ['3782822463100050', null], ['30569309025904', 'diners'], ['3530111333300000', 'jcb'],
    ['6011111111111117', 'discover'], ['6200000000000005', 'unionpay'], ['2200000000000004', 'mir'], ['1234567812345670', null], ['9999999999999995', null],
  ])('cardNetwork(%s) = %s', (digits, network) => expect(cardNetwork(digits)).toBe(network));

  it.each([
    ['DE89370400440532013000', true], ['DE89370400440532013001', false], ['DE8937040044053201300', false], ['GB82WEST12345698765432', true],
    ['NO9386011117947', true], ['XX89370400440532013000', false], ['de89370400440532013000', false], ['MT84MALT011000012345MTLCAST001S', true],
  ])('ibanValid(%s) = %s', (iban, ok) => expect(ibanValid(iban)).toBe(ok));

  it.each([
    ['123', '45', '6789', true], ['000', '45', '6789', false], ['666', '45', '6789', false], ['900', '45', '6789', false], ['999', '45', '6789', false],
    ['899', '45', '6789', true], ['123', '00', '6789', false], ['123', '45', '0000', false],
  ])('ssnValid(%s-%s-%s) = %s', (a, g, s, ok) => expect(ssnValid(a, g, s)).toBe(ok));

  it.each([
    ['192.168.1.1', true], ['0.0.0.0', true], ['255.255.255.255', true], ['256.1.1.1', false], ['1.2.3', false], ['1.2.3.4.5', false], ['01.2.3.4', false], ['1..3.4', false],
  ])('ipv4Valid(%s) = %s', (ip, ok) => expect(ipv4Valid(ip)).toBe(ok));

  it.each([
    ['2001:db8::1', true], ['2001:0db8:85a3:0000:0000:8a2e:0370:7334', true], ['::ffff:192.0.2.128', true], ['::', true], ['1:2:3:4:5:6:7:8', true],
    ['1:2:3:4:5:6:7', false], ['1:2:3:4:5:6:7:8:9', false], ['1::2::3', false], ['12345::1', false], ['g::1', false], ['::ffff:300.0.2.1', false], ['10:30:00', false],
  ])('ipv6Valid(%s) = %s', (ip, ok) => expect(ipv6Valid(ip)).toBe(ok));

  it.each([
    [Buffer.from('{"alg":"HS256","typ":"JWT"}').toString('base64url'), true], [Buffer.from('{"alg":"none"}').toString('base64url'), true],
    [Buffer.from('{"typ":"JWT"}').toString('base64url'), false], [Buffer.from('{"alg":1}').toString('base64url'), false], [Buffer.from('["alg"]').toString('base64url'), false], ['eyJub3QganNvbg', false],
  ])('jwtHeaderValid(%s) = %s', (h, ok) => expect(jwtHeaderValid(h)).toBe(ok));

  it('normalizes key names and classifies them', () => {
    expect(normalizeKey('E-Mail Address')).toBe('emailaddress');
    expect(normalizeKey('date_of.birth')).toBe('dateofbirth');
    expect(keyContextType('emailaddress')).toBe('email');
    expect(keyContextType('shippingaddress')).toBe('address');
    expect(keyContextType('ipaddress')).toBe('ip_address');
    expect(keyContextType('nextpagetoken')).toBeNull();
    expect(keyContextType('tokens')).toBeNull();
    expect(keyContextType('')).toBeNull();
  });
});
