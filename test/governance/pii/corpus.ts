// Personal-data corpus for the scanner: realistic positives per detector type and near-miss negatives (invalid checksums, dates, versions, ids).
import { generateKeyPairSync } from 'node:crypto';

export interface CorpusCase {
  /** The text scanned. */
  text: string;
  /** Every span that must be found, by type and exact value; empty for a negative. */
  expect: { type: string; value: string }[];
}

/** Embeddings a value is seen in: bare, in prose, in JSON-ish and key=value text, in brackets, at a line end. */
const CONTEXTS: readonly ((v: string) => string)[] = [
  (v) => v,
  (v) => `Contact: ${v}.`,
  (v) => `{"value": "${v}", "ok": true}`,
  (v) => `field=${v}; next=1`,
  (v) => `Please use ${v} for this request`,
  (v) => `line one\n${v}\nline three`,
  (v) => `(${v})`,
];

function positives(type: string, values: readonly string[]): CorpusCase[] {
  return values.map((value, i) => ({ text: CONTEXTS[i % CONTEXTS.length]!(value), expect: [{ type, value }] }));
}

const b64u = (o: unknown): string => Buffer.from(JSON.stringify(o)).toString('base64url');
const jwt = (header: object, payload: object, sig: string): string => `${b64u(header)}.${b64u(payload)}.${sig}`;

function privateKeys(): string[] {
  const keys: string[] = [];
  for (const curve of ['prime256v1', 'secp384r1']) {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: curve });
    keys.push(privateKey.export({ type: 'pkcs8', format: 'pem' }).toString().trim());
    keys.push(privateKey.export({ type: 'sec1', format: 'pem' }).toString().trim());
  }
  for (const kind of ['ed25519', 'x25519'] as const) {
    const { privateKey } = kind === 'ed25519' ? generateKeyPairSync('ed25519') : generateKeyPairSync('x25519');
    keys.push(privateKey.export({ type: 'pkcs8', format: 'pem' }).toString().trim());
  }
  const { privateKey: rsa } = generateKeyPairSync('rsa', { modulusLength: 1024 });
  keys.push(rsa.export({ type: 'pkcs1', format: 'pem' }).toString().trim());
  keys.push(rsa.export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'corpus' }).toString().trim());
  keys.push(
    '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACDg1mL0mF6oT3cZJ0Z4l7m0J1nYF3a8y1p0kq9vJrKQ1AAAAJgH2n3RB9p9\n-----END OPENSSH PRIVATE KEY-----',
  );
  keys.push('-----BEGIN DSA PRIVATE KEY-----\nMIIBuwIBAAKBgQDhb2k1Yk5n0w3Vq6nJx8W3H2l0dK9f\n-----END DSA PRIVATE KEY-----');
  return keys;
}

const now = 1_700_000_000;

export const POSITIVE_CASES: readonly CorpusCase[] = [
  ...positives('email', [
    'jane.doe@example.com', 'j.smith+newsletter@mail.example.co.uk', 'first_last@sub.domain.io', 'o\'brien@example.ie'.replace("'", ''),
    'support-team@company-name.com', 'user123@gmail.com', 'x@y.de', 'ANNA.MUELLER@EXAMPLE.DE', 'admin%ops@example.org', 'noreply@notifications.github.com',
    'chen.wei@university.edu.cn',
  ]),
  ...positives('phone', [
    '+1 415 555 2671', '+44 20 7946 0958', '+49 30 12345678', '+33 1 23 45 67 89', '+1-202-555-0143', '+14155552671',
    '+61 2 9876 5432', '+81 3-1234-5678', '+91 98765 43210', '+1 (415) 555-2671', '(415) 555-2671', '415-555-2671',
    '212.555.0187', '020 7946 0958', '07700 900123', '030 12345678', '01 23 45 67 89', '+353 1 234 5678',
  ]),
  ...positives('phone', ['0044 20 7946 0958', '0033 1 23 45 67 89', '0049-30-12345678', '001 415 555 2671', '0039 06 1234 5678', '00353 1 234 5678', '0061.2.9876.5432']),
  ...positives('card', ['4111 1111-1111 1111', '5555-5555 5555-4444', '3782-822463 10005']),
  ...positives('email', ['jane.doe%40example.com', 'anna%2Emueller%40example%2Ede']),
  ...positives('card', [
    '4111111111111111', '4012 8888 8888 1881', '5555-5555-5555-4444', '5105105105105100', '3782 822463 10005', '371449635398431',
    '6011 1111 1111 1117', '6011000990139424', '3530111333300000', '3566 0020 2036 0505', '30569309025904', '38520000023237',
    '4222222222222', '2223 0031 2200 3222', '6200000000000005', '4000056655665556', '5200828282828210', '4917610000000000003',
  ]),
  ...positives('iban', [
    'DE89 3704 0044 0532 0130 00', 'GB82WEST12345698765432', 'FR14 2004 1010 0505 0001 3M02 606', 'NL91ABNA0417164300',
    'ES91 2100 0418 4502 0005 1332', 'IT60X0542811101000000123456', 'BE68 5390 0754 7034', 'CH93 0076 2011 6238 5295 7',
    'AT611904300234573201', 'NO93 8601 1117 947', 'SE45 5000 0000 0583 9825 7466', 'PL61109010140000071219812874',
    'DK50 0040 0440 1162 43', 'FI2112345600000785', 'IE29 AIBK 9311 5212 3456 78', 'GR16 0110 1250 0000 0001 2300 695',
    'LU280019400644750000', 'CZ65 0800 0000 1920 0014 5399', 'HU42117730161111101800000000',
  ]),
  ...positives('ssn', [
    '123-45-6789', '078-05-1120', '219-09-9999', '457-55-5462', '536-22-8726', '001-01-0001', '665-12-3456', '772-11-2233',
    '899-99-9999', '123 45 6789', '404-28-1937', '610 33 0482',
  ]),
  ...positives('ip_address', [
    '192.168.1.10', '10.0.0.1', '8.8.8.8', '172.16.254.1', '203.0.113.195', '198.51.100.7', '1.1.1.1', '100.64.0.12',
    '85.214.132.117', '255.255.255.0', '2001:db8::1', '2001:0db8:85a3:0000:0000:8a2e:0370:7334', 'fe80::1ff:fe23:4567:890a',
    '::ffff:192.0.2.128', '2606:4700:4700::1111', '2001:db8:0:0:1:0:0:1', 'fd12:3456:789a:1::1', '2a00:1450:4001:80b::200e',
    '2001:4860:4860::8888',
  ]),
  ...positives('aws_access_key', [
    'AKIAIOSFODNN7EXAMPLE', 'ASIAMEUNI26YI7LA75OJ', 'ASIAJVWAIBJKAGF6WGQ6', 'ASIAEK4F6EIODFBOVVRV', 'AKIAED47LIQGB3Y66PPI',
    'AKIAACIR3WBU6IWW4TMB', 'AKIAPZ2QKVELTPISC7GF', 'ASIARL3VIQKGHPDHDEZG', 'AKIAI3OHQ45DOQLHJTK3', 'AKIAFHEKSO3VCS2MLAKN',
  ]),
  ...[
    ['aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'],
    ['AWS_SECRET_ACCESS_KEY=JSGmiJRuFQK5LXSblCHI7LFvCJjY+eZ5zXbWhGUM', 'JSGmiJRuFQK5LXSblCHI7LFvCJjY+eZ5zXbWhGUM'],
    ['{"AccessKeyId": "AKIAI3OHQ45DOQLHJTK3", "SecretAccessKey": "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"}', 'PnnyWu4PH2lu5xKegQLFXelKI1Z39AnY7g13GJvm', 'AKIAI3OHQ45DOQLHJTK3'],
    ['secret_key: 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', 'yrFCDsKjI1klrD9UmgMH2FzIIFQJazsyaV564Tnf'],
    ["aws-secret-key='7AEUyAESKwxc8zltHoxGTjoRc7b5pp164ys7zl/u'", '7AEUyAESKwxc8zltHoxGTjoRc7b5pp164ys7zl/u'],
    ['export AWS_SECRET_KEY="Zt3Lq9V0pR8mK2nB5xW7yC4dF6gH1jA0sE3uI9oP"', 'Zt3Lq9V0pR8mK2nB5xW7yC4dF6gH1jA0sE3uI9oP'],
    ['aws_secret_access_key=Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8L9z0', 'Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8L9z0'],
    ['SecretKey: "mN8bV7cX6zL5kJ4hG3fD2sA1qW0eR9tY8uI7oP6a"', 'mN8bV7cX6zL5kJ4hG3fD2sA1qW0eR9tY8uI7oP6a'],
    ['secretAccessKey = 3f9K+2Lm/8Pq1Rs7Tu4Vw6Xy0Za5Bc3De9Fg2Hi8', '3f9K+2Lm/8Pq1Rs7Tu4Vw6Xy0Za5Bc3De9Fg2Hi8'],
    ['aws_secret_access_key:abcdEFGHijklMNOPqrstUVWXyz0123456789+/AB', 'abcdEFGHijklMNOPqrstUVWXyz0123456789+/AB'],
  ].map(([text, value, keyId]) => ({
    text: text!,
    expect: [{ type: 'aws_secret_key', value: value! }, ...(keyId === undefined ? [] : [{ type: 'aws_access_key', value: keyId }])],
  })),
  ...positives('github_token', [
    'ghp_Ou6igk18AuUChMTisD2x3ykoGJv0NLC8dH7o', 'ghr_BwKpQBx9QRmLyOuoUKK89VP7u1QQVFnM6zB3', 'gho_AFnuxskuXLywDGaX9uvfzviVYwsslGaULHHC',
    'ghu_MFZIxh6bKDouAnfZkZAICkZ3NOBmutXrDDYg', 'ghp_dqC315geIeyKolvcG6zMyL79Nw8oVLFplQKc', 'ghs_m3aEnitCv1GqAJD3TXhv8zazICYnzJXtup84',
    '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',
    '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',
    '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',
    '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',
  ]),
  ...positives('slack_token', [
    'xoxa-24398383739-6835371928909-hnqURuwflaLz52B7kXbTdzvw', 'xoxr-39025648116-1402330158307-y48NyAV9KsrE3TemmhOUus1a',
    'xoxb-45700056448-2830406804243-eleGmztoaeKhul0UJ4TWJqYx', 'xoxb-58023345127-6131103345682-7nK1Ra9KqtU0B0pPxStlY1An',
    'xoxp-77044654635-9492708626132-9492708626133-5f3e8a7c1b2d4e6f8a9b0c1d2e3f4a5b', 'xoxb-96408676606-9751555786627-rmOUHHvnvNPBrcljEAoyUwpE',
    'xoxa-2-08268524665-3730872891802-xUXFjXdNZGRHZ5lNULQGs21p'.replace('xoxa-2-', 'xoxa-'), 'xoxp-57794214706-3369813758700-F8GflDC7k9UxmUhRsqiCYYGy',
    'xoxr-94473899229-1385017843078-YooBvyfwR3ec2rJ9KqDY5zIH', 'xoxb-02713556048-1130698750039-NxCmiH7KhdlMWfipkFUCdjSF',
  ]),
  ...positives('google_api_key', [
    'AIzaaFESWiz1XiuyLCA9lGG9patR2J465HHg4jm', 'AIzaCJsd0dCptMYBRrW6xSq_00t7ynhtSLQ5ZNG', 'AIzadKDs4ONUQ0Eorx24ervd2PGqLRt_dz_uNA4',
    'AIzam2dDNFPg5E8xE3WyfPsNu2_3ZutfjbTakIf', 'AIzac-jn5t2ZdV9r9qbTl5vH9aoUJIbMzp38CMA', 'AIzatp8VHB8cwL5S3N-lAXLKTy6ATT9Vn44PY2d',
    'AIzapaKqeiSEGrFgvhNfF3KjdXgmROmWvbgwNZF', 'AIzaqcR35uvwzaP4-B8do6PzlKyVhHNJR12Cllg', 'AIzaBlWzjblbrKdnEuws69AAISdo5ivGzTa9ZG-',
    'AIza5QvMFKyTNIsPcRFqIvkAXJeEUWsfJEj0qRe',
  ]),
  ...positives('private_key', privateKeys()),
  ...positives('jwt', [
    jwt({ alg: 'HS256', typ: 'JWT' }, { sub: '1234567890', name: 'John Doe', iat: 1516239022 }, 'SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c'),
    jwt({ alg: 'RS256', kid: 'k1' }, { iss: 'https://id.example.com', aud: 'gatehouse', exp: now + 3600 }, 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'),
    jwt({ alg: 'ES256', typ: 'JWT' }, { sub: 'agent-7', scope: 'read' }, 'MEUCIQDx3v9J7kq0aLr9X2c4yZ8w1bN5mP0sT6uV3eW8xY7zAiBq'),
    jwt({ alg: 'none' }, { sub: 'anon' }, ''),
    jwt({ typ: 'JWT', alg: 'EdDSA' }, { iat: now, nbf: now, jti: 'a1b2c3' }, 'gk8A0vK3Lq2xP9sN4mC7bD1eF6hJ5tR0yW2uI8oQ3zX'),
    jwt({ alg: 'PS512', typ: 'at+jwt' }, { client_id: 'svc', roles: ['reader'] }, 'Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5'),
    jwt({ alg: 'HS512' }, { email: 'n@example.com' }, 'YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo'),
    jwt({ alg: 'RS384', x5t: 'abc' }, { tenant: 't-42', exp: now }, 'c2lnbmF0dXJlLWJ5dGVzLWhlcmUtZm9yLXRoZS10ZXN0'),
    jwt({ alg: 'HS256', typ: 'JWT' }, { sub: 'u-9', admin: false }, 'Q2hlY2stdGhlLXNpZ25hdHVyZS1zZWdtZW50LWxlbmd0aA'),
    jwt({ alg: 'ES384', cty: 'JWT' }, { nested: true }, 'bmVzdGVkLXRva2VuLXNpZ25hdHVyZQ'),
  ]),
  ...positives('stripe_key', [
    'sk_live_uXFKTrM9Nt4fuzUmUvzLCXW2Ev6SLU3RQXz0nkKTAV1rNCRckJh8TusF18yVZq4YBq', 'sk_test_QpH7ZbxB7SUXcrcOJanIPgsIUxNxiVGk6JV255GsuQQ0L',
    'sk_test_LGuuTYoO1UHbOSsvxYbrQjFpKUCcNfQW5Ihv7G2ue9TzT', 'sk_live_5tlXCJuvEbqqzEXisSwYYHjhg1cOq74zlL6',
    'sk_live_j5n75T2t7zsVlYxWwFTjlnuWGZ1RtOz89FkRnpqc5DHqLS3hcMIhEtBZpMQ1wgkDRongxOFmp',
    'rk_live_AF2sXZgFZCyYObJt4nK5gh6ZBFeloI8d0evW7Qq18LxCC9sYdLTAX1wdbeZYQFiMLdsF66kOXA7R', 'sk_live_p8AjjdvTgyKEhQwWTQyryqYRMoswE7Qq7DE',
    'rk_live_z5VRtqy6EnKMEoB1VS7UX0GdoQvO9veHoS3OwSzWOsFD6daAP1f', 'sk_live_4eC39HqLyjWDarjtT1zdp7dc', 'sk_test_51H8xYzKl2mNpQrStUvWxYzAbCdEfGh',
  ]),
  ...[
    'Vedffovma4iXCad~-0R-eKXnir9tlkSs', '4QJLLifPg-uOrYOpvI.GFlke3kFaK0f_', 'G4r1k6AFiHvF7Oz8zfMPiTtEGqs_5Jvg', 'nisWZWDy.GdFsG1Wx26bE-a2g2z0O7u3',
    '9oJlsd7DkHEKnBRb2-i7gu2b8aMR9KnS', 'c1R6cc0.0tg-qaQMpuV672pBij4IPG4Z', '4gCx4w1WcrN2lzofHmsDFLsNOdLd5iVx', 'I_68CnpCBdEQGv05GntETfYKLxfSgCkP',
    'Tfg2O~ci9LuuGF52C3MBkBANAeyW9dTj', 'R3rJfNRgkZWs8N.tJnVYF34CKgTKI~9P',
  ].map((token, i) => ({
    text: [`Authorization: Bearer ${token}`, `curl -H "Authorization: Bearer ${token}" https://api.example.com`, `bearer ${token}`][i % 3]!,
    expect: [{ type: 'bearer_token', value: token }],
  })),
  // Values percent-encoded inside URLs: found decoded, redacted where they sit in the URL.
  { text: 'https://api.example.com/users?email=jane.doe%40example.com&ssn=123%2D45%2D6789', expect: [{ type: 'email', value: 'jane.doe%40example.com' }, { type: 'ssn', value: '123%2D45%2D6789' }] },
  { text: 'callback=https%3A%2F%2Fx.example%2F%3Fphone%3D%252B44%252020%25207946%25200958', expect: [{ type: 'phone', value: '%252B44%252020%25207946%25200958' }] },
  { text: '/search?q=card%204111%201111%201111%201111', expect: [{ type: 'card', value: '4111%201111%201111%201111' }] },
  // Several kinds in one text.
  {
    text: 'Customer Jane (jane@example.org, +44 20 7946 0958) paid with 4111-1111-1111-1111 from 203.0.113.9; IBAN GB82WEST12345698765432.',
    expect: [
      { type: 'email', value: 'jane@example.org' }, { type: 'phone', value: '+44 20 7946 0958' }, { type: 'card', value: '4111-1111-1111-1111' },
      { type: 'ip_address', value: '203.0.113.9' }, { type: 'iban', value: 'GB82WEST12345698765432' },
    ],
  },
];

/** Near misses: each looks like a positive type but is not one; nothing may be found in them. */
export const NEGATIVE_CASES: readonly CorpusCase[] = [
  // cards failing Luhn or issuer ranges
  '4111111111111112', '5555 5555 5555 4445', '3782 822463 10006', '6011-1111-1111-1118', '1234 5678 9012 3456', '9999999999999995',
  'Order 1234-5678-9012',
  // mixed separators outside a printed card layout, or failing Luhn
  '41 11-1111 1111 1111', '4111 1111-1111 1112', '4111-11 11 1111 1111',
  // 00-prefixed digit groups that are not international numbers (unassigned code, trunk 0, inside a longer group run, no separator)
  '0012 3456 7890', '0044 0532 0130 77', 'ref 1234 0044 2079 4609', '00442079460958', '0028 1234 5678', '00 44 20', '0049-30',
  // percent-encoded text that decodes to near misses
  'https://cdn.example.com/icon%402x.png', 'q=2024%2D01%2D15', 'path=%2Fv1%2Forders%2F48213', 'ver=10.0%2E19041', 'tracking 1Z999AA10123456784', 'EAN 4006381333931',
  // dates, times and timestamps that look like SSNs or phones
  '2023-01-15', '12-31-1999', '1999-12-31', '01/15/2023', '2023-01-15T10:30:00Z', '2024-03-05 14:22:01', '2024-03-05T14:22:01.123+01:00',
  '10:30:45', '1700000000000', 'created 1700000000', '15.01.2023', '2023 01 15', '31 12 1999',
  // SSNs outside the issued ranges or with mixed separators
  '000-12-3456', '666-12-3456', '912-34-5678', '123-00-4567', '123-45-0000', '123-45 6789', '123-45-67890',
  // versions and numbers that look like IP addresses
  '1.2.3.4.5', '10.0.19041', '10.0.19041.1', 'v1.2.3.4', 'version 4.3.2.1', 'Mozilla/5.0 (X11) Chrome/120.0.0.0 Safari/537.36',
  '1.2.3', '256.1.1.1', '01.02.03.04', '999.999.999.999', 'node v24.21.0', '2.14.0-beta.1', 'build 6.1.7601.1', 'release 1.0.0.0',
  // ISBNs, order numbers and ids
  'ISBN 978-3-16-148410-0', 'ISBN 0-306-40615-2', '978-0-306-40615-7', '9780306406157', 'ORD-2023-000123', 'INV-2024-00042',
  'Order #100-234-5678', 'ticket 555-0100', 'PO 4500012345', 'room 0-12',
  // UUIDs and hashes
  '550e8400-e29b-41d4-a716-446655440000', 'f47ac10b-58cc-4372-a567-0e02b2c3d479', 'da39a3ee5e6b4b0d3255bfef95601890afd80709',
  'commit 9fceb02d0ae598e95dc970b74767f19372d61af8', 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  'etag "33a64df551425fcc55e4d42a148795d9f25f89d4"',
  // IBANs with bad checksums or unknown countries
  'DE89370400440532013001', 'GB82WEST12345698765433', 'NL91ABNA0417164301', 'XX12345678901234', 'DE89 3704 0044 0532 0130',
  // emails that are not addresses
  'user@localhost', 'name@', '@handle', 'icon@2x.png', 'a..b@example.com', 'foo@bar', 'john.@example.com', 'see @scope/pkg@1.0.0',
  // colons that are not IPv6
  '00:1A:2B:3C:4D:5E', 'std::vector<int>', '::1', '1:2:3', 'a::b', 'Foo::Bar::baz()', 'ratio 16:9:4',
  // phone-ish numbers
  '+3.5%', 'ext. 1234', '+1', '1234567', '0.5.12', 'Total: 12 345 678 items', '$1,234,567.89', '37.7749, -122.4194', 'score +12 points',
  // secret-ish strings that are not secrets
  'AKIA1234', 'ghp_short', 'AIzaShort', 'eyJmb28iOiJiYXIifQ.eyJ4IjoxfQ.c2ln', 'sk_live_short', 'Bearer authentication is required',
  'xoxb-notatoken', '-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----',
  '-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----', 'secret sauce recipe', 'The bearer of this letter',
  'eyJhbGciOiJIUzI1NiJ9', 'token_type=bearer',
  // ordinary API and log text
  'GET /api/v2/orders/48213?page=3&limit=50 HTTP/1.1', 'https://cdn.example.com/assets/app.3f9a1c.js', 'Shipped 3 items on 2024-05-01 at 09:15',
  'Price: EUR 1.299,00 (incl. 19% VAT)', 'Error: connection reset after 30000 ms (attempt 2/5)', 'SKU-88213-BLK-XL', 'Lorem ipsum dolor sit amet, 42 times.',
  'pid=48213 uptime=86400s load=0.42,0.37,0.30', 'Deployed release 2024.05.01-rc2 to eu-west-1', 'lat=52.5200 lon=13.4050',
  'ISO 8601 duration P3Y6M4DT12H30M5S', 'rgba(12, 34, 56, 0.5)', '#FF5733 and #C70039', 'Invoice 2024-000123 due 2024-06-30',
  'SELECT * FROM users WHERE id = 12345678', 'docker.io/library/node:24.21.0-bookworm', 'x-request-id: 7f3c9d2e-1b4a-4c8e-9f0a-2d6b8e1c3a5f',
].map((text) => ({ text, expect: [] }));

export const CORPUS: readonly CorpusCase[] = [...POSITIVE_CASES, ...NEGATIVE_CASES];
