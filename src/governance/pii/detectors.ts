// The validated personal-data detectors: candidate patterns narrowed by checksums, ranges and structure, grouped behind cheap gates so ordinary strings cost one or two character tests.
import {
  cardNetwork, digitCount, digitsOnly, ibanValid, IBAN_LENGTHS, ipv4Valid, ipv6Valid, jwtHeaderValid, luhnValid, nanpValid, ssnValid,
} from './checks.js';

/** One detected span of personal data in a string, `end` exclusive. */
export interface PiiMatch {
  start: number;
  end: number;
  type: string;
}

/**
 * Which cheap pre-filter must pass before a detector runs: `at` (an `@`),
 * `digits` (a run of digits and separators), `colon`, `secret` (a known token
 * prefix) or `always`.
 */
export type DetectorGate = 'at' | 'digits' | 'plus' | 'dots' | 'colon' | 'secret' | 'always';

export interface PiiDetector {
  readonly type: string;
  readonly gate?: DetectorGate;
  /** Fewest ASCII digits a match needs; strings with fewer skip the detector. */
  readonly minDigits?: number;
  /** Appends every match in `text`; `keyHint` is the normalized key the string sits under, when known. */
  find(text: string, found: PiiMatch[], keyHint: string | undefined): void;
}

/** Runs a global regex and keeps the spans that `accept` confirms (it may narrow the span). */
function regexDetector(
  type: string,
  gate: DetectorGate,
  re: RegExp,
  accept: (m: RegExpExecArray, text: string) => [number, number] | null,
  minDigits = 0,
): PiiDetector {
  if (!re.global) throw new TypeError(`detector ${type}: regex must be global`);
  return {
    type,
    gate,
    minDigits,
    find(text, found) {
      re.lastIndex = 0;
      let m: RegExpExecArray | null;
      while ((m = re.exec(text)) !== null) {
        const span = accept(m, text);
        if (span !== null) found.push({ start: span[0], end: span[1], type });
        if (m[0].length === 0) re.lastIndex++;
      }
    },
  };
}

const whole = (m: RegExpExecArray): [number, number] => [m.index, m.index + m[0].length];
/** Span of the last capture group, which every context pattern ends with. */
const tailGroup = (m: RegExpExecArray, g: number): [number, number] => {
  const end = m.index + m[0].length;
  return [end - (m[g] ?? '').length, end];
};

// ---------------------------------------------------------------- email

const isAlnum = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
// . _ % + -
const isLocalChar = (c: number): boolean => isAlnum(c) || c === 46 || c === 95 || c === 37 || c === 43 || c === 45;
const isDomainChar = (c: number): boolean => isAlnum(c) || c === 46 || c === 45;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
// `icon@2x.png` is an asset name, not an address.
const FILE_TLDS = new Set(['png', 'jpg', 'jpeg', 'gif', 'svg', 'webp', 'ico', 'bmp', 'avif']);

/** Expands left and right from each `@`, so the cost is linear in the string. */
const emailDetector: PiiDetector = {
  type: 'email',
  gate: 'at',
  find(text, found) {
    let at = text.indexOf('@');
    while (at !== -1) {
      let s = at;
      while (s > 0 && at - s < 64 && isLocalChar(text.charCodeAt(s - 1))) s--;
      let e = at + 1;
      while (e < text.length && e - at <= 253 && isDomainChar(text.charCodeAt(e))) e++;
      while (e > at + 1 && (text[e - 1] === '.' || text[e - 1] === '-')) e--;
      if (s < at && e > at + 1 && emailParts(text.slice(s, at), text.slice(at + 1, e))) {
        found.push({ start: s, end: e, type: 'email' });
      }
      at = text.indexOf('@', Math.max(at + 1, e));
    }
  },
};

function emailParts(local: string, domain: string): boolean {
  if (local.startsWith('.') || local.endsWith('.') || local.includes('..')) return false;
  const labels = domain.split('.');
  if (labels.length < 2) return false;
  for (const l of labels) if (!LABEL.test(l)) return false;
  const tld = labels[labels.length - 1]!;
  return /^[A-Za-z]{2,24}$/.test(tld) && !FILE_TLDS.has(tld.toLowerCase());
}

// ---------------------------------------------------------------- phone

/** `+` international form: 8–15 digits (E.164), sane separators, at most one bracketed group. */
function phoneShapeOk(s: string): boolean {
  const n = digitCount(s);
  if (n < 8 || n > 15) return false;
  if (/[ .-]{2}/.test(s)) return false;
  const open = s.indexOf('(');
  const close = s.indexOf(')');
  if ((open === -1) !== (close === -1)) return false;
  if (open !== -1 && (close < open || s.indexOf('(', open + 1) !== -1 || s.indexOf(')', close + 1) !== -1)) return false;
  // A dotted `+` form is only a phone number when every separator is a dot (`+33.1.23.45.67.89`).
  if (s.includes('.') && /[ -]/.test(s)) return false;
  return true;
}

const phoneIntl = regexDetector('phone', 'plus', /(?<![\w+])\+\d[\d ().-]{6,22}\d(?!\w)/g, (m) => (phoneShapeOk(m[0]) ? whole(m) : null), 8);

/**
 * ITU country codes that can follow an international `00` prefix: the one- and two-digit codes, and the leading two
 * digits of every three-digit code zone (ITU-T E.164 assignments).
 */
const COUNTRY_CODES_1 = new Set(['1', '7']);
const COUNTRY_CODES_2 = new Set([
  '20', '27', '30', '31', '32', '33', '34', '36', '39', '40', '41', '43', '44', '45', '46', '47', '48', '49', '51', '52', '53', '54', '55', '56', '57', '58',
  '60', '61', '62', '63', '64', '65', '66', '81', '82', '84', '86', '90', '91', '92', '93', '94', '95', '98',
]);
const COUNTRY_CODE_3_ZONES = new Set(['21', '22', '23', '24', '25', '26', '29', '35', '37', '38', '42', '50', '59', '67', '68', '69', '85', '87', '88', '96', '97', '99']);

function countryCodeValid(cc: string): boolean {
  if (cc.length === 1) return COUNTRY_CODES_1.has(cc);
  if (cc.length === 2) return COUNTRY_CODES_2.has(cc);
  return cc.length === 3 && COUNTRY_CODE_3_ZONES.has(cc.slice(0, 2));
}

/**
 * International form with the `00` exit prefix (`0044 20 7946 0958`, `0049-30-12345678`, `001 415 555 2671`): the
 * country code stands alone before the first separator and must be an assigned one; one separator kind; 8–15 digits
 * after the prefix (E.164); not a group inside a longer run of digit groups. Without separators a `00…` run is left
 * to the other detectors: it is as likely an id.
 */
const phoneExit = regexDetector(
  'phone',
  'digits',
  /(?<![\w+.\-/]|\d[ .-])00([1-9]\d{0,2})([ .-])(\d)\d{0,4}(?:\2\d{1,8}){0,5}(?![\w-]|\.\d)/g,
  (m) => {
    if (!countryCodeValid(m[1]!)) return null;
    // The national trunk 0 is dropped after a country code (Italy alone keeps it): `0044 0532 …` is a digit group, not a number.
    if (m[3] === '0' && m[1] !== '39') return null;
    const n = digitCount(m[0]) - 2;
    return n >= 8 && n <= 15 ? whole(m) : null;
  },
  10,
);

/** NANP national form: `(415) 555-2671`, `415-555-2671`, `415.555.2671` with one separator kind. */
const phoneNanp = regexDetector(
  'phone',
  'digits',
  /(?<![\w+.\-/])(?:\((\d{3})\)[ -]?|(\d{3})([ .-]))(\d{3})([ .-])(\d{4})(?![\w-]|\.\d)/g,
  (m) => {
    const area = m[1] ?? m[2]!;
    if (m[3] !== undefined && m[3] !== m[5]) return null;
    return nanpValid(area, m[4]!) ? whole(m) : null;
  },
  10,
);

/** Trunk-prefix national form (`020 7946 0958`, `01 23 45 67 89`, `030-12345678`): 10–11 digits, one separator kind. */
const phoneTrunk = regexDetector(
  'phone',
  'digits',
  /(?<![\w+.\-/])0\d{1,4}([ -])\d{2,8}(?:\1\d{2,8}){0,4}(?![\w-]|\.\d)/g,
  (m) => {
    const n = digitCount(m[0]);
    return n >= 10 && n <= 11 ? whole(m) : null;
  },
  10,
);

// ---------------------------------------------------------------- cards, IBAN, SSN

/** Digit-group layouts card numbers are printed in (Visa/Mastercard/Discover/JCB 4-4-4-4, 19-digit 4-4-4-4-3, Amex 4-6-5, Diners 4-6-4). */
const CARD_LAYOUTS = new Set(['4-4-4-4', '4-4-4-4-3', '4-6-5', '4-6-4', '4-4-4-1', '4-4-4-2', '4-4-4-3', '4-4-5', '5-5-5', '4-4-4-4-2']);

const cardDetector = regexDetector('card', 'digits', /(?<![\w.-])\d(?:[ -]?\d){12,18}(?![\w-]|\.\d)/g, (m) => {
  const raw = m[0];
  const seps = raw.replace(/\d+/g, '');
  // Mixed separators (`4111 1111-1111 1111`, a hand-typed form) count only in a printed card layout; one kind, any grouping.
  if (seps.length > 0 && seps !== seps[0]!.repeat(seps.length) && !CARD_LAYOUTS.has(raw.split(/[ -]/).map((g) => g.length).join('-'))) return null;
  if (seps.length > 5) return null;
  const digits = digitsOnly(raw);
  return cardNetwork(digits) !== null && luhnValid(digits) ? whole(m) : null;
}, 13);

/** Finds the country's exact length inside the candidate (spaces allowed), so a following word is never swallowed. */
const ibanDetector = regexDetector('iban', 'digits', /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}/g, (m, text) => {
  const raw = m[0];
  const expected = IBAN_LENGTHS[raw.slice(0, 2)];
  if (expected === undefined) return null;
  let compact = '';
  let i = 0;
  for (; i < raw.length && compact.length < expected; i++) if (raw[i] !== ' ') compact += raw[i];
  if (compact.length !== expected) return null;
  const end = m.index + i;
  if (end < text.length && /[A-Za-z0-9]/.test(text[end]!)) return null;
  return ibanValid(compact) ? [m.index, end] : null;
}, 4);

/** 3-2-4 with one separator kind: the shape alone rules out ISO (4-2-2) and US (2-2-4) dates. */
const ssnDetector = regexDetector('ssn', 'digits', /(?<![\w\-./:])(\d{3})([- ])(\d{2})\2(\d{4})(?![\w\-:]|\.\d)/g, (m) =>
  ssnValid(m[1]!, m[3]!, m[4]!) ? whole(m) : null,
  9,
);

// ---------------------------------------------------------------- IP addresses

// Decided: a dotted quad right after a product token (`Chrome/120.0.0.0`) or a version word (`v`, `version`, `build`, `release`, `rev`) is a version, not an address.
const VERSION_CONTEXT = /(?:\b(?:v|ver|version|build|release|rev|revision)\s*[:=#]?\s*|[A-Za-z]\/)$/i;

const ipv4Detector = regexDetector('ip_address', 'dots', /(?<![\w.-])(?:\d{1,3}\.){3}\d{1,3}(?![\w-]|\.\d)/g, (m, text) => {
  if (!ipv4Valid(m[0])) return null;
  if (VERSION_CONTEXT.test(text.slice(Math.max(0, m.index - 16), m.index))) return null;
  return whole(m);
}, 4);

const ipv6Detector = regexDetector('ip_address', 'colon', /(?<![\w:.])[0-9A-Fa-f:][0-9A-Fa-f:.]{1,44}(?![\w:])/g, (m) => {
  let s = m[0];
  while (s.endsWith('.')) s = s.slice(0, -1);
  let colons = 0;
  let hex = 0;
  let nonZero = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === ':') colons++;
    else if (c !== '.') {
      hex++;
      if (c !== '0') nonZero = true;
    }
  }
  // Fewer than four hex digits (`::1`, `a::b`) is a loopback or a scoped name, not a host address.
  if (colons < 2 || hex < 4 || !nonZero || !ipv6Valid(s)) return null;
  return [m.index, m.index + s.length];
});

// ---------------------------------------------------------------- secrets

const awsKeyId = regexDetector(
  'aws_access_key',
  'secret',
  /(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}(?![A-Za-z0-9])/g,
  whole,
);

/** A 40-character secret key only counts next to a key name that says so; alone it is indistinguishable from a hash. */
const AWS_SECRET_VALUE = /^[A-Za-z0-9/+]{40}$/;
const awsSecretText = regexDetector(
  'aws_secret_key',
  'secret',
  /(?:aws)?[_-]?secret[_-]?(?:access)?[_-]?key["']?\s*[:=]\s*["']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])/gi,
  (m) => tailGroup(m, 1),
);
const awsSecretKeyed: PiiDetector = {
  type: 'aws_secret_key',
  gate: 'always',
  find(text, found, keyHint) {
    if (keyHint !== undefined && keyHint.includes('secret') && AWS_SECRET_VALUE.test(text)) {
      found.push({ start: 0, end: text.length, type: 'aws_secret_key' });
    }
  },
};

const githubToken = regexDetector(
  'github_token',
  'secret',
  /(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})(?![A-Za-z0-9_])/g,
  whole,
);
const slackToken = regexDetector('slack_token', 'secret', /(?<![A-Za-z0-9])xox[abpr]-\d{6,14}-[0-9A-Za-z-]{8,255}(?![A-Za-z0-9-])/g, whole);
const googleKey = regexDetector('google_api_key', 'secret', /(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])/g, whole);
const stripeKey = regexDetector('stripe_key', 'secret', /(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{24,247}(?![A-Za-z0-9_])/g, whole);
const jwtDetector = regexDetector(
  'jwt',
  'secret',
  /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*(?![A-Za-z0-9_-])/g,
  (m) => (jwtHeaderValid(m[0].slice(0, m[0].indexOf('.'))) ? whole(m) : null),
);
/** The credential after `Bearer`; it must hold a digit so prose ("Bearer authentication") is left alone. */
const bearerToken = regexDetector('bearer_token', 'secret', /\b[Bb]earer\s+([A-Za-z0-9\-._~+/]{16,}=*)/g, (m) =>
  /\d/.test(m[1]!) ? tailGroup(m, 1) : null,
);

/** A PEM private key runs to its END line; without one, to the end of the text (a truncated key is still a key). */
const pemDetector: PiiDetector = {
  type: 'private_key',
  gate: 'secret',
  find(text, found) {
    const re = /-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----/g;
    let m: RegExpExecArray | null;
    while ((m = re.exec(text)) !== null) {
      const endMarker = `-----END ${m[1]}PRIVATE KEY-----`;
      const endAt = text.indexOf(endMarker, re.lastIndex);
      const end = endAt === -1 ? text.length : endAt + endMarker.length;
      found.push({ start: m.index, end, type: 'private_key' });
      re.lastIndex = end;
    }
  },
};

// ---------------------------------------------------------------- bare values under a telling field name

const DOB_VALUE = /^(?:\d{4}-\d{1,2}-\d{1,2}(?:T[\d:.]+(?:Z|[+-]\d\d:?\d\d)?)?|\d{1,2}[/.-]\d{1,2}[/.-](?:\d{2}|\d{4})|\d{8})$/;

/**
 * A value whose only context is its field or column name (`{"ssn": "123456789"}`, a `phone` column holding
 * `4155552671`): the name says what it is, the value must still have that type's shape. Fast mode; deep mode
 * replaces every non-empty value under such a name anyway.
 */
const keyedValue: PiiDetector = {
  type: 'keyed',
  gate: 'always',
  find(text, found, keyHint) {
    if (keyHint === undefined) return;
    const type = keyedType(keyHint);
    if (type === null) return;
    const v = text.trim();
    const start = text.indexOf(v);
    let ok = false;
    if (type === 'ssn') {
      const d = /^\d{3}([- ]?)\d{2}\1\d{4}$/.test(v) ? digitsOnly(v) : '';
      ok = d.length === 9 && ssnValid(d.slice(0, 3), d.slice(3, 5), d.slice(5));
    } else if (type === 'phone') {
      const n = digitCount(v);
      ok = /^\+?[\d ().-]+$/.test(v) && n >= 7 && n <= 15 && !/[ .-]{2}/.test(v);
    } else if (type === 'dob') {
      ok = DOB_VALUE.test(v);
    } else if (type === 'passport') {
      ok = /^[A-Za-z0-9]{6,9}$/.test(v) && /\d/.test(v);
    }
    if (ok) found.push({ start, end: start + v.length, type });
  },
};

/** The type a normalized field name gives a bare value (exact names and `customer_ssn`-style suffixes, not `ssn_count`). */
export function keyedType(norm: string): KeyedType | null {
  // Runs for every string under a key: names repeat, so each is classified once (bounded).
  let type = keyedTypes.get(norm);
  if (type === undefined) {
    type = null;
    for (const [t, names] of KEYED_NAMES) if (names.includes(norm)) type = t;
    if (type === null) for (const [suffix, t] of KEYED_SUFFIXES) if (norm.endsWith(suffix)) type = t;
    if (keyedTypes.size > 10_000) keyedTypes.clear();
    keyedTypes.set(norm, type);
  }
  return type;
}

type KeyedType = 'ssn' | 'phone' | 'dob' | 'passport';
const keyedTypes = new Map<string, KeyedType | null>();

// Suffixes long or specific enough not to end unrelated words (`tel` ends `hotel`, `cell` ends `excell`).
const KEYED_SUFFIXES: readonly (readonly [string, 'ssn' | 'phone' | 'dob' | 'passport'])[] = [
  ['ssn', 'ssn'], ['socialsecuritynumber', 'ssn'], ['phonenumber', 'phone'], ['phone', 'phone'], ['mobilenumber', 'phone'], ['telephone', 'phone'],
  ['dateofbirth', 'dob'], ['birthdate', 'dob'], ['passportnumber', 'passport'],
];

const KEYED_NAMES: readonly (readonly ['ssn' | 'phone' | 'dob' | 'passport', readonly string[]])[] = [
  ['ssn', ['ssn', 'socialsecurity', 'socialsecuritynumber', 'socialsecurityno']],
  ['phone', ['phone', 'phonenumber', 'phoneno', 'mobile', 'mobilenumber', 'cell', 'cellphone', 'telephone', 'tel', 'fax', 'msisdn', 'homephone', 'workphone', 'mobilephone']],
  ['dob', ['dob', 'dateofbirth', 'birthdate', 'birthday', 'birthdt']],
  ['passport', ['passport', 'passportnumber', 'passportno']],
];

/** Validated detectors run in fast mode (and in deep mode before key context). Order breaks ties between equal spans. */
export const FAST_DETECTORS: readonly PiiDetector[] = Object.freeze([
  pemDetector, jwtDetector, awsKeyId, awsSecretText, awsSecretKeyed, githubToken, slackToken, googleKey, stripeKey, bearerToken,
  emailDetector, ibanDetector, cardDetector, ssnDetector, phoneIntl, phoneExit, phoneNanp, phoneTrunk, ipv4Detector, ipv6Detector, keyedValue,
]);

// ---------------------------------------------------------------- deep free-text context

// Whitespace is consumed once before the optional separator and once after it, never split two ways (no quadratic backtracking).
const SEP = String.raw`\s*(?:(?:is|:|=|#|-)\s*)?`;
const DATE = String.raw`(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}|\d{1,2}\s+[A-Za-z]{3,9}\.?\s+\d{4}|[A-Za-z]{3,9}\.?\s+\d{1,2},?\s+\d{4})`;

/**
 * Phrase-context detectors for free text (deep mode only): a labelled value
 * ("SSN: 123456789", "password is hunter2", "DOB 01/02/1980") is redacted
 * even when its shape alone would not be enough.
 */
export const CONTEXT_DETECTORS: readonly PiiDetector[] = Object.freeze([
  regexDetector('ssn', 'always', new RegExp(String.raw`\b(?:ssn|social\s+security(?:\s+(?:number|no\.?))?)${SEP}(\d{3}[- ]?\d{2}[- ]?\d{4})(?!\d)`, 'gi'), (m) => {
    const d = digitsOnly(m[1]!);
    return ssnValid(d.slice(0, 3), d.slice(3, 5), d.slice(5)) ? tailGroup(m, 1) : null;
  }),
  regexDetector('password', 'always', /\b(?:password|passwd|pwd|passphrase|pin)\s*(?:is|:|=)\s*("[^"\n]{1,200}"|'[^'\n]{1,200}'|[^\s"',;]{1,200})/gi, (m) => tailGroup(m, 1)),
  regexDetector('dob', 'always', new RegExp(String.raw`\b(?:dob|d\.o\.b\.|date\s+of\s+birth|birth\s*date|birthday|born(?:\s+on)?)${SEP}(${DATE})`, 'gi'), (m) => tailGroup(m, 1)),
  regexDetector('phone', 'always', new RegExp(String.raw`\b(?:phone|tel|telephone|mobile|cell|fax)(?:\s*(?:no\.?|number|#))?${SEP}(\+?\d[\d ().-]{5,20}\d)(?!\d)`, 'gi'), (m) => {
    const n = digitCount(m[1]!);
    return n >= 7 && n <= 15 ? tailGroup(m, 1) : null;
  }),
  regexDetector('passport', 'always', new RegExp(String.raw`\bpassport(?:\s*(?:no\.?|number|#))?${SEP}([A-Z0-9]{6,9})\b`, 'gi'), (m) =>
    /\d/.test(m[1]!) ? tailGroup(m, 1) : null,
  ),
  regexDetector('secret', 'always', /\b(?:api[_\-\s]?key|secret|access[_\-\s]?token|auth[_\-\s]?token|client[_\-\s]?secret)\s*(?:is|:|=)\s*["']?([A-Za-z0-9_\-./+=]{12,512})/gi, (m) =>
    tailGroup(m, 1),
  ),
]);
