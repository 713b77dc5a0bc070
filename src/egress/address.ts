// Egress address policy: parses every numeric host form resolvers accept and classifies an address as an allowed public target or a named forbidden range (spec §4 "HTTP proxy" rule 5; docs/egress.md).
import ipaddr from 'ipaddr.js';

type IPv4 = ipaddr.IPv4;
type IPv6 = ipaddr.IPv6;

export type HostLiteral =
  | { kind: 'ipv4'; address: string }
  | { kind: 'ipv6'; address: string }
  | { kind: 'name'; name: string }
  | { kind: 'invalid'; reason: 'empty' | 'zone_id' | 'malformed_ip' };

export interface AddressClass {
  /** True only for a global unicast address outside every blocked range. */
  allowed: boolean;
  /** `unicast` when allowed, otherwise the blocked range's name (e.g. `loopback`, `metadata`, `ipv4Mapped:private`). */
  range: string;
  /**
   * True when the operator setting `gateway.egress.allow_private_sources` may lift the block for a named source:
   * loopback, RFC 1918, CGNAT, IPv6 unique-local and site-local (and those embedded in mapped/NAT64 forms).
   * Metadata, link-local, unspecified, multicast, broadcast, reserved and documentation ranges are never lifted.
   */
  privateOverridable: boolean;
  /** The address a connection should use (IPv4-mapped forms connect to their embedded IPv4). */
  connectAddress: string;
}

const OVERRIDABLE_V4 = new Set(['loopback', 'private', 'carrierGradeNat']);
const OVERRIDABLE_V6 = new Set(['loopback', 'uniqueLocal', 'deprecatedSiteLocal']);
const METADATA_V4 = new Set(['169.254.169.254', '169.254.170.2', '100.100.100.200']);
const METADATA_V6 = new Set(['fd00:ec2::254']);
/** 2000::/3: the only IPv6 block IANA allocates as global unicast; anything outside is refused. */
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parse('2000::');
const NAT64_LOCAL_USE = ipaddr.IPv6.parse('64:ff9b:1::');

/**
 * Parses a URL host or resolver answer into what a connection would really reach.
 * Accepts every IPv4 spelling WHATWG URL and inet_aton accept (decimal integer `2130706433`, octal
 * `0177.0.0.1`, hex `0x7f.0.0.1` / `0x7f000001`, short `127.1`, mixed, full-width digits, trailing dot)
 * and IPv6 with or without brackets; zone ids (`fe80::1%eth0`) are refused. A host whose last label
 * is numeric but does not parse as IPv4 is `invalid` (WHATWG refuses it too), never a name to resolve.
 */
export function parseHostLiteral(host: string): HostLiteral {
  if (host === '') return { kind: 'invalid', reason: 'empty' };
  let h = host;
  if (h.startsWith('[')) {
    if (!h.endsWith(']')) return { kind: 'invalid', reason: 'malformed_ip' };
    h = h.slice(1, -1);
    return parseV6(h);
  }
  if (h.includes(':')) return parseV6(h);

  // WHATWG host parsing maps full-width digits and ideographic full stops before the IPv4 parser runs.
  h = h.normalize('NFKC').replace(/[\u3002\uff0e\uff61]/gu, '.').toLowerCase();
  const v4 = parseV4Whatwg(h);
  if (v4 === 'not_numeric') return { kind: 'name', name: h };
  if (v4 === 'invalid') return { kind: 'invalid', reason: 'malformed_ip' };
  return { kind: 'ipv4', address: v4 };
}

function parseV6(h: string): HostLiteral {
  if (h.includes('%')) return { kind: 'invalid', reason: 'zone_id' };
  if (!/^[0-9A-Fa-f:.]{2,45}$/.test(h)) return { kind: 'invalid', reason: 'malformed_ip' };
  // WHATWG's IPv6 parser first: ipaddr.js reads `::127.0.0.1` as the mapped `::ffff:7f00:1`, which it is not.
  let normalized: string;
  try {
    normalized = new URL(`http://[${h}]/`).hostname.slice(1, -1);
  } catch {
    return { kind: 'invalid', reason: 'malformed_ip' };
  }
  if (!ipaddr.IPv6.isValid(normalized)) return { kind: 'invalid', reason: 'malformed_ip' };
  return { kind: 'ipv6', address: ipaddr.IPv6.parse(normalized).toString() };
}

/** The WHATWG URL IPv4 parser (https://url.spec.whatwg.org/#concept-ipv4-parser), which also matches inet_aton. */
function parseV4Whatwg(h: string): string | 'not_numeric' | 'invalid' {
  const labels = h.split('.');
  if (labels.length > 1 && labels[labels.length - 1] === '') labels.pop();
  const last = labels[labels.length - 1] ?? '';
  // "Ends in a number": only then is the host an IPv4 address (or invalid); otherwise it is a domain.
  if (!/^(?:\d+|0x[0-9a-f]*)$/.test(last)) return 'not_numeric';
  if (labels.length > 4) return 'invalid';
  const nums: number[] = [];
  for (const label of labels) {
    const n = parseV4Number(label);
    if (n === null) return 'invalid';
    nums.push(n);
  }
  for (let i = 0; i < nums.length - 1; i++) if (nums[i]! > 255) return 'invalid';
  const lastNum = nums[nums.length - 1]!;
  if (lastNum >= 256 ** (5 - nums.length)) return 'invalid';
  let value = lastNum;
  for (let i = 0; i < nums.length - 1; i++) value += nums[i]! * 256 ** (3 - i);
  return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
}

function parseV4Number(label: string): number | null {
  if (label === '') return null;
  let digits = label;
  let radix = 10;
  if (/^0x/.test(label)) {
    digits = label.slice(2);
    radix = 16;
    if (digits === '') return 0;
  } else if (label.length > 1 && label.startsWith('0')) {
    digits = label.slice(1);
    radix = 8;
  }
  const pattern = radix === 16 ? /^[0-9a-f]+$/ : radix === 8 ? /^[0-7]+$/ : /^\d+$/;
  if (!pattern.test(digits)) return null;
  // Past 2^32 any value is invalid; cap the length so huge labels do not cost big-number work.
  if (digits.length > 32) return Number.MAX_SAFE_INTEGER;
  const n = Number.parseInt(digits, radix);
  return Number.isFinite(n) ? n : null;
}

/**
 * Classifies an address (any form parseHostLiteral accepts). A string that is not an IP literal
 * is `{ allowed: false, range: 'not_an_address' }` — names are resolved first, then each answer classified.
 */
export function classifyAddress(ip: string): AddressClass {
  const lit = parseHostLiteral(ip);
  if (lit.kind === 'ipv4') return classifyV4(ipaddr.IPv4.parse(lit.address));
  if (lit.kind === 'ipv6') return classifyV6(ipaddr.IPv6.parse(lit.address));
  const range = lit.kind === 'invalid' ? lit.reason : 'not_an_address';
  return { allowed: false, range, privateOverridable: false, connectAddress: '' };
}

function classifyV4(addr: IPv4): AddressClass {
  const text = addr.toString();
  if (METADATA_V4.has(text)) return denied('metadata', false, text);
  const range = addr.range();
  if (range === 'unicast') return { allowed: true, range, privateOverridable: false, connectAddress: text };
  return denied(range, OVERRIDABLE_V4.has(range), text);
}

function classifyV6(addr: IPv6): AddressClass {
  const text = addr.toString();
  if (METADATA_V6.has(text)) return denied('metadata', false, text);
  const parts = addr.parts;

  // ::ffff:a.b.c.d reaches a.b.c.d on a dual-stack socket: judge (and connect to) the embedded IPv4.
  if (addr.isIPv4MappedAddress()) return embedded('ipv4Mapped', addr.toIPv4Address(), true);
  // ::a.b.c.d (deprecated IPv4-compatible, RFC 4291 §2.5.5.1): no legitimate public use; refused whatever it embeds.
  if (parts.slice(0, 6).every((p) => p === 0) && !(parts[6] === 0 && parts[7]! <= 1)) {
    return denied(`ipv4Compatible:${v4From(parts[6]!, parts[7]!).range()}`, false, text);
  }
  if (addr.match(NAT64_LOCAL_USE, 48)) return denied('nat64LocalUse', false, text);
  const range = addr.range();
  if (range === 'rfc6052') {
    // 64:ff9b::/96 — a NAT64 gateway forwards to the embedded IPv4.
    return embedded('nat64', v4From(parts[6]!, parts[7]!), false, text);
  }
  if (range === '6to4') return embedded('6to4', v4From(parts[1]!, parts[2]!), false, text);
  if (range === 'teredo') return denied('teredo', false, text);
  if (range === 'unicast' && addr.match(GLOBAL_UNICAST_V6, 3)) return { allowed: true, range, privateOverridable: false, connectAddress: text };
  if (range === 'unicast') return denied('reserved', false, text);
  return denied(range, OVERRIDABLE_V6.has(range), text);
}

/** Judges an IPv6 form by the IPv4 address it carries; blocked when the IPv4 is. */
function embedded(kind: string, v4: IPv4, connectToV4: boolean, v6Text?: string): AddressClass {
  const inner = classifyV4(v4);
  const connectAddress = connectToV4 ? inner.connectAddress : (v6Text ?? inner.connectAddress);
  if (inner.allowed) return { allowed: true, range: `${kind}:unicast`, privateOverridable: false, connectAddress };
  // Only the plain mapped form may be lifted by the private-egress setting; translation mechanisms stay blocked.
  return { allowed: false, range: `${kind}:${inner.range}`, privateOverridable: connectToV4 && inner.privateOverridable, connectAddress };
}

function v4From(hi: number, lo: number): IPv4 {
  return new ipaddr.IPv4([hi >> 8, hi & 255, lo >> 8, lo & 255]);
}

function denied(range: string, privateOverridable: boolean, connectAddress: string): AddressClass {
  return { allowed: false, range, privateOverridable, connectAddress };
}
