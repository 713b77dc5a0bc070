// Key-name context: normalizing key and column names, the names that mark personal data in deep mode, and the globs for column redaction and free-text fields.

/** `E-Mail`, `e_mail`, `eMail`, `E MAIL` → `email`: case and separators do not change what a field holds. */
export function normalizeKey(key: string): string {
  return key.toLowerCase().replace(/[\s_\-.]+/g, '');
}

/** Normalized names that mark their whole value as personal data (deep mode). */
const EXACT: Readonly<Record<string, string>> = Object.freeze({
  email: 'email', emailaddress: 'email', mail: 'email',
  ssn: 'ssn', socialsecurity: 'ssn', socialsecuritynumber: 'ssn', socialsecurityno: 'ssn',
  dob: 'dob', dateofbirth: 'dob', birthdate: 'dob', birthday: 'dob', birthdt: 'dob',
  phone: 'phone', phonenumber: 'phone', mobile: 'phone', mobilenumber: 'phone', cell: 'phone', cellphone: 'phone', telephone: 'phone', tel: 'phone', fax: 'phone', msisdn: 'phone',
  address: 'address', street: 'address', streetaddress: 'address', addressline: 'address', addressline1: 'address', addressline2: 'address', homeaddress: 'address', mailingaddress: 'address',
  postcode: 'postcode', postalcode: 'postcode', zip: 'postcode', zipcode: 'postcode',
  passport: 'passport', passportnumber: 'passport', passportno: 'passport',
  nationalid: 'national_id', nationalidentifier: 'national_id', nin: 'national_id', nino: 'national_id', driverslicense: 'national_id', driverlicense: 'national_id', licensenumber: 'national_id',
  taxid: 'tax_id', tin: 'tax_id', vatnumber: 'tax_id', taxnumber: 'tax_id', ein: 'tax_id',
  iban: 'iban', bankaccount: 'bank_account', accountnumber: 'bank_account', routingnumber: 'bank_account', sortcode: 'bank_account', bic: 'bank_account',
  card: 'card', cardnumber: 'card', creditcard: 'card', creditcardnumber: 'card', ccnumber: 'card', pan: 'card', cvv: 'card', cvc: 'card', cvv2: 'card',
  password: 'password', passwd: 'password', pwd: 'password', passphrase: 'password', pin: 'password',
  secret: 'secret', clientsecret: 'secret', privatekey: 'secret', secretkey: 'secret', secretaccesskey: 'secret',
  token: 'token', accesstoken: 'token', refreshtoken: 'token', idtoken: 'token', authtoken: 'token', sessiontoken: 'token', authorization: 'token', bearer: 'token', cookie: 'token', sessionid: 'token',
  apikey: 'api_key', xapikey: 'api_key', apisecret: 'api_key', apitoken: 'api_key',
  ip: 'ip_address', ipaddress: 'ip_address', ipaddr: 'ip_address', clientip: 'ip_address', remoteaddr: 'ip_address',
  firstname: 'name', lastname: 'name', fullname: 'name', surname: 'name', givenname: 'name', familyname: 'name', middlename: 'name', maidenname: 'name',
});

/** Suffixes checked after the exact table (`customer_email`, `billingAddress`, `homePhone`), most specific first. */
const SUFFIXES: readonly (readonly [string, string])[] = [
  ['ipaddress', 'ip_address'], ['emailaddress', 'email'], ['email', 'email'],
  ['phonenumber', 'phone'], ['phone', 'phone'], ['mobilenumber', 'phone'],
  ['ssn', 'ssn'], ['socialsecuritynumber', 'ssn'], ['dateofbirth', 'dob'], ['birthdate', 'dob'], ['dob', 'dob'],
  ['streetaddress', 'address'], ['address', 'address'], ['street', 'address'], ['postcode', 'postcode'], ['postalcode', 'postcode'], ['zipcode', 'postcode'],
  ['passportnumber', 'passport'], ['passport', 'passport'], ['nationalid', 'national_id'], ['taxid', 'tax_id'],
  ['iban', 'iban'], ['accountnumber', 'bank_account'], ['cardnumber', 'card'], ['creditcard', 'card'],
  ['password', 'password'], ['passwd', 'password'], ['secret', 'secret'], ['privatekey', 'secret'],
  ['apikey', 'api_key'], ['accesstoken', 'token'], ['refreshtoken', 'token'], ['token', 'token'],
  ['firstname', 'name'], ['lastname', 'name'], ['fullname', 'name'],
];

// Tokens that paginate or count, and addresses that are not personal, are not credentials or contact data.
const NOT_PERSONAL = /(?:pagetoken|cursortoken|continuationtoken|synctoken|nexttoken|tokentype|tokencount|macaddress|contractaddress)$/;

// Plurals name lists of the same data (`emails`, `phone_numbers`, `addresses`); `tokens` is left out because it mostly counts LLM tokens.
const PLURAL_TYPES = new Set(['email', 'phone', 'address', 'ssn', 'iban', 'ip_address']);

/** The personal-data type a key name implies, or null. */
export function keyContextType(normalized: string): string | null {
  if (normalized.length === 0 || normalized.length > 128) return null;
  if (NOT_PERSONAL.test(normalized)) return null;
  const direct = lookup(normalized);
  if (direct !== null) return direct;
  for (const cut of [1, 2]) {
    if (normalized.length > cut + 2 && normalized.endsWith(cut === 1 ? 's' : 'es')) {
      const t = lookup(normalized.slice(0, -cut));
      if (t !== null && PLURAL_TYPES.has(t)) return t;
    }
  }
  return null;
}

function lookup(n: string): string | null {
  const exact = EXACT[n];
  if (exact !== undefined) return exact;
  for (const [suffix, type] of SUFFIXES) if (n.endsWith(suffix)) return type;
  return null;
}

/** Case-insensitive glob over a name: `*` any run, `?` one character. */
export function globToRegExp(glob: string): RegExp {
  let src = '';
  for (const ch of glob) {
    if (ch === '*') src += '.*';
    else if (ch === '?') src += '.';
    else src += ch.replace(/[.+^${}()|[\]\\/]/g, '\\$&');
  }
  return new RegExp(`^${src}$`, 'i');
}

/** A compiled list of name globs; results are memoized per name because keys repeat across records. */
export class NameMatcher {
  readonly empty: boolean;
  private readonly res: RegExp[];
  private readonly memo = new Map<string, boolean>();

  constructor(globs: readonly string[]) {
    // A schema- or table-qualified pattern (`users.ssn`, `*.ssn`) is matched by its column part: result rows do not say which table a column came from, so the safe reading redacts more, never less.
    this.res = globs.filter((g) => g.length > 0).map((g) => globToRegExp(g.includes('.') ? g.slice(g.lastIndexOf('.') + 1) : g));
    this.empty = this.res.length === 0;
  }

  matches(name: string): boolean {
    if (this.empty) return false;
    let hit = this.memo.get(name);
    if (hit === undefined) {
      hit = this.res.some((re) => re.test(name));
      if (this.memo.size > 10_000) this.memo.clear();
      this.memo.set(name, hit);
    }
    return hit;
  }
}

/**
 * Free-text field patterns: a plain glob names a key anywhere (`notes`, `*_comment`);
 * a pattern with `.` or `[`, or starting with `$`, is a JSON path
 * (`$.tickets[*].body`, `tickets.*.body`, `**.description`): `*` is one
 * segment, `**` any number, and array indexes are segments too.
 */
export class FreeTextMatcher {
  readonly keys: NameMatcher;
  /** Start state of the path automaton, or null when no path patterns are configured. */
  readonly pathStart: PathState | null;

  constructor(patterns: readonly string[]) {
    const names: string[] = [];
    const paths: Segment[][] = [];
    for (const p of patterns) {
      if (p.startsWith('$') || p.includes('.') || p.includes('[')) paths.push(splitPath(p).map((seg) => (seg === '**' ? ANY_DEPTH : globToRegExp(seg))));
      else names.push(p);
    }
    this.keys = new NameMatcher(names);
    this.pathStart = paths.length === 0 ? null : PathState.start(paths);
  }
}

const ANY_DEPTH = Symbol('**');
type Segment = RegExp | typeof ANY_DEPTH;

function closure(pattern: readonly Segment[], positions: readonly number[]): number[] {
  const out = new Set<number>();
  const todo = [...positions];
  while (todo.length > 0) {
    const pi = todo.pop()!;
    if (out.has(pi)) continue;
    out.add(pi);
    if (pattern[pi] === ANY_DEPTH) todo.push(pi + 1);
  }
  return [...out].sort((a, b) => a - b);
}

/**
 * One state of the lazily built path automaton: the positions reached in every
 * pattern after the path so far. Transitions are memoized per segment, so a
 * document walk costs one map lookup per container and value; a dead state
 * (no pattern can still match) ends path checks for the whole subtree.
 */
export class PathState {
  readonly accept: boolean;
  readonly dead: boolean;
  private readonly next = new Map<string, PathState>();

  private constructor(
    private readonly patterns: readonly (readonly Segment[])[],
    private readonly positions: readonly (readonly number[])[],
    /** States with the same positions are one state, so sibling records share their memoized transitions. */
    private readonly interned: Map<string, PathState>,
  ) {
    this.accept = positions.some((ps, i) => ps.includes(patterns[i]!.length));
    this.dead = positions.every((ps) => ps.length === 0);
  }

  static start(patterns: readonly (readonly Segment[])[]): PathState {
    const interned = new Map<string, PathState>();
    const positions = patterns.map((pat) => closure(pat, [0]));
    const state = new PathState(patterns, positions, interned);
    interned.set(positionsKey(positions), state);
    return state;
  }

  step(segment: string): PathState {
    const memo = this.next.get(segment);
    if (memo !== undefined) return memo;
    const positions = this.patterns.map((pat, i) => {
      const reached: number[] = [];
      for (const pi of this.positions[i]!) {
        const seg = pat[pi];
        if (seg === undefined) continue;
        if (seg === ANY_DEPTH) reached.push(pi);
        else if (seg.test(segment)) reached.push(pi + 1);
      }
      return closure(pat, reached);
    });
    const key = positionsKey(positions);
    let state = this.interned.get(key);
    if (state === undefined) {
      state = new PathState(this.patterns, positions, this.interned);
      // The state count is bounded by the pattern positions, so interning cannot grow without limit.
      this.interned.set(key, state);
    }
    // Array indexes and generated keys would grow the memo without bound.
    if (this.next.size < 1_000) this.next.set(segment, state);
    return state;
  }
}

function positionsKey(positions: readonly (readonly number[])[]): string {
  return positions.map((ps) => ps.join(',')).join('|');
}

function splitPath(p: string): string[] {
  const s = p.replace(/^\$\.?/, '').replace(/\[(\*|\d+)\]/g, '.$1').replace(/\[['"]([^'"]*)['"]\]/g, '.$1');
  return s.split('.').filter((x) => x.length > 0);
}
