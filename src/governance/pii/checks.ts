// Validation rules behind the personal-data detectors: checksums (Luhn, IBAN mod-97), number ranges (SSN, NANP, IP octets) and structure (IPv6, JWT header).

/** Luhn (mod 10) checksum over a string of ASCII digits. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return false;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

/**
 * Issuer identification (IIN) ranges with the lengths each network issues.
 * Only networks whose numbers reach 13 digits are listed: shorter Maestro
 * numbers are left out because 12 bare digits are mostly order numbers.
 */
export function cardNetwork(digits: string): string | null {
  const len = digits.length;
  const p1 = digits.charCodeAt(0) - 48;
  const p2 = Number(digits.slice(0, 2));
  const p3 = Number(digits.slice(0, 3));
  const p4 = Number(digits.slice(0, 4));
  const p6 = Number(digits.slice(0, 6));
  if (p1 === 4) return len === 13 || len === 16 || len === 19 ? 'visa' : null;
  if (p2 >= 51 && p2 <= 55) return len === 16 ? 'mastercard' : null;
  if (p4 >= 2221 && p4 <= 2720) return len === 16 ? 'mastercard' : null;
  if (p4 >= 2200 && p4 <= 2204) return len >= 16 && len <= 19 ? 'mir' : null;
  if (p2 === 34 || p2 === 37) return len === 15 ? 'amex' : null;
  if (p4 >= 3528 && p4 <= 3589) return len >= 16 && len <= 19 ? 'jcb' : null;
  if ((p3 >= 300 && p3 <= 305) || p2 === 36 || p2 === 38 || p2 === 39) return len >= 14 && len <= 19 ? 'diners' : null;
  if (p4 === 6011 || p2 === 65 || (p3 >= 644 && p3 <= 649) || (p6 >= 622126 && p6 <= 622925)) {
    return len >= 16 && len <= 19 ? 'discover' : null;
  }
  if (p2 === 62) return len >= 16 && len <= 19 ? 'unionpay' : null;
  if (p2 === 50 || (p2 >= 56 && p2 <= 69)) return len >= 13 && len <= 19 ? 'maestro' : null;
  return null;
}

/** IBAN lengths per country (ISO 13616 registry). */
export const IBAN_LENGTHS: Readonly<Record<string, number>> = Object.freeze({
  AD: 24, AE: 23, AL: 28, AT: 20, AZ: 28, BA: 20, BE: 16, BG: 22, BH: 22, BI: 27, BR: 29, BY: 28,
  CH: 21, CR: 22, CY: 28, CZ: 24, DE: 22, DJ: 27, DK: 18, DO: 28, EE: 20, EG: 29, ES: 24, FI: 18,
  FK: 18, FO: 18, FR: 27, GB: 22, GE: 22, GI: 23, GL: 18, GR: 27, GT: 28, HN: 28, HR: 21, HU: 28,
  IE: 22, IL: 23, IQ: 23, IS: 26, IT: 27, JO: 30, KW: 30, KZ: 20, LB: 28, LC: 32, LI: 21, LT: 20,
  LU: 20, LV: 21, LY: 25, MC: 27, MD: 24, ME: 22, MK: 19, MN: 20, MR: 27, MT: 31, MU: 30, NI: 28,
  NL: 18, NO: 15, OM: 23, PK: 24, PL: 28, PS: 29, QA: 29, RO: 24, RS: 22, RU: 33, SA: 24, SC: 31,
  SD: 18, SE: 24, SI: 19, SK: 24, SM: 27, SO: 23, ST: 25, SV: 28, TL: 23, TN: 24, TR: 26, UA: 29,
  VA: 22, VG: 24, XK: 20, YE: 30,
});

/** ISO 7064 mod 97-10 over an IBAN without spaces (uppercase). */
export function ibanValid(iban: string): boolean {
  const expected = IBAN_LENGTHS[iban.slice(0, 2)];
  if (expected === undefined || iban.length !== expected) return false;
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let rem = 0;
  for (let i = 0; i < rearranged.length; i++) {
    const c = rearranged.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      rem = (rem * 10 + (c - 48)) % 97;
    } else if (c >= 65 && c <= 90) {
      rem = (rem * 100 + (c - 55)) % 97;
    } else {
      return false;
    }
  }
  return rem === 1;
}

/** US SSN range rules (SSA): area not 000, 666 or 900–999; group not 00; serial not 0000. */
export function ssnValid(area: string, group: string, serial: string): boolean {
  if (area === '000' || area === '666' || area.charCodeAt(0) === 57 /* '9' */) return false;
  if (group === '00') return false;
  if (serial === '0000') return false;
  return true;
}

/** NANP: area code and exchange start with 2–9; N11 service codes are not subscriber numbers. */
export function nanpValid(area: string, exchange: string): boolean {
  if (area.charCodeAt(0) < 50 || exchange.charCodeAt(0) < 50) return false;
  if (area[1] === '1' && area[2] === '1') return false;
  return true;
}

/** Dotted-quad IPv4 with canonical octets (0–255, no leading zeros: those read as octal to some parsers and mostly mark versions). */
export function ipv4Valid(text: string): boolean {
  const parts = text.split('.');
  if (parts.length !== 4) return false;
  for (const p of parts) {
    if (p.length === 0 || p.length > 3) return false;
    if (p.length > 1 && p.charCodeAt(0) === 48) return false;
    const n = Number(p);
    if (!Number.isInteger(n) || n > 255) return false;
  }
  return true;
}

/** RFC 4291 text form: eight 16-bit groups, one `::` elision, optional trailing dotted IPv4. */
export function ipv6Valid(text: string): boolean {
  if (text.length < 2 || text.length > 45) return false;
  const dbl = text.indexOf('::');
  if (dbl !== -1 && text.indexOf('::', dbl + 1) !== -1) return false;
  let groups = 0;
  const halves = dbl === -1 ? [text] : [text.slice(0, dbl), text.slice(dbl + 2)];
  for (let h = 0; h < halves.length; h++) {
    const half = halves[h]!;
    if (half === '') continue;
    const parts = half.split(':');
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      const last = h === halves.length - 1 && i === parts.length - 1;
      if (last && part.includes('.')) {
        if (!ipv4Valid(part)) return false;
        groups += 2;
        continue;
      }
      if (!/^[0-9A-Fa-f]{1,4}$/.test(part)) return false;
      groups += 1;
    }
  }
  return dbl === -1 ? groups === 8 : groups <= 7;
}

/** A JWT (RFC 7519) header is base64url JSON naming its `alg`. */
export function jwtHeaderValid(headerPart: string): boolean {
  if (headerPart.length > 2048) return false;
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(headerPart, 'base64url').toString('utf8'));
  } catch {
    return false;
  }
  return typeof decoded === 'object' && decoded !== null && typeof (decoded as { alg?: unknown }).alg === 'string';
}

/** Counts ASCII digits. */
export function digitCount(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 48 && c <= 57) n++;
  }
  return n;
}

/** Keeps ASCII digits only. */
export function digitsOnly(text: string): string {
  return text.replace(/\D+/g, '');
}
