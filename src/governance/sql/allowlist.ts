// The deny-by-default call allowlist: built-in functions by family, operator symbols and cast types, and the verdict on one call as written.
/**
 * PostgreSQL's volatility classes (pg_proc.provolatile): immutable, stable, volatile. A family declares the weakest
 * class its members may have; a source whose pg_proc reports a stronger one for a name does not get that name
 * (sources.ts narrows, never widens).
 */
export type Volatility = 'i' | 's' | 'v';
export const VOLATILITY_RANK: Readonly<Record<Volatility, number>> = Object.freeze({ i: 0, s: 1, v: 2 });

export interface FunctionFamily {
  /** Why calling these cannot write, signal, read files or settings, or run SQL the gateway cannot see. */
  readonly reason: string;
  /** The strongest volatility a member may have on a source (pg_proc.provolatile). */
  readonly volatility: Volatility;
  readonly names: readonly string[];
}

/**
 * Built-in functions (pg_catalog, PostgreSQL 15 onwards) a statement may call without a role rule naming them.
 * Every name exists in pg_catalog of PostgreSQL 15 (test/governance/sql/function-catalog.test.ts checks it against
 * the real pg_proc). docs/governance/sql.md "Functions: deny by default" explains each family. Not here on purpose:
 * anything taking SQL, a table or a relation (ts_stat, ts_rewrite, query_to_xml, pg_relation_size …), settings
 * (current_setting, set_config), sequences, locks, files, large objects, signals, statistics, replication, catalog
 * lookups (obj_description, pg_get_*), session and server information beyond the database and schema names.
 */
export const BUILTIN_FUNCTION_FAMILIES: Readonly<Record<string, FunctionFamily>> = Object.freeze({
  math: {
    reason: 'arithmetic on their arguments only',
    volatility: 'i',
    names: [
      'abs', 'cbrt', 'ceil', 'ceiling', 'degrees', 'div', 'exp', 'factorial', 'floor', 'gcd', 'lcm', 'ln', 'log', 'log10',
      'min_scale', 'mod', 'pi', 'power', 'radians', 'round', 'scale', 'sign', 'sqrt', 'trim_scale', 'trunc', 'width_bucket',
      'acos', 'acosd', 'asin', 'asind', 'atan', 'atan2', 'atan2d', 'atand', 'cos', 'cosd', 'cot', 'cotd', 'sin', 'sind',
      'tan', 'tand', 'sinh', 'cosh', 'tanh', 'asinh', 'acosh', 'atanh',
    ],
  },
  random: {
    reason: 'a random number or UUID from the server generator; no state outside the call (setseed, which changes the session seed, is not here)',
    volatility: 'v',
    names: ['random', 'gen_random_uuid'],
  },
  string: {
    reason: 'text in, text out: string functions over their arguments',
    volatility: 's',
    names: [
      'ascii', 'bit_length', 'btrim', 'char_length', 'character_length', 'chr', 'concat', 'concat_ws', 'format', 'initcap',
      'left', 'length', 'lower', 'lpad', 'ltrim', 'md5', 'normalize', 'octet_length', 'overlay', 'position', 'quote_ident',
      'quote_literal', 'quote_nullable', 'regexp_count', 'regexp_instr', 'regexp_like', 'regexp_match', 'regexp_matches',
      'regexp_replace', 'regexp_split_to_array', 'regexp_split_to_table', 'regexp_substr', 'repeat', 'replace', 'reverse',
      'right', 'rpad', 'rtrim', 'split_part', 'starts_with', 'strpos', 'substr', 'substring', 'to_hex', 'translate', 'unistr',
      'upper', 'string_to_array', 'string_to_table', 'array_to_string', 'to_ascii',
      // The function behind `||` on text, called by name through the protocol's FunctionCall.
      'textcat',
    ],
  },
  binary: {
    reason: 'bytes in, bytes or text out: encodings and hashes of their arguments',
    volatility: 's',
    names: [
      'encode', 'decode', 'sha224', 'sha256', 'sha384', 'sha512', 'convert_from', 'convert_to', 'get_byte', 'get_bit',
      'set_byte', 'set_bit', 'bit_count',
    ],
  },
  datetime: {
    reason: 'date and time arithmetic, formatting and the transaction or wall clock',
    volatility: 'v',
    names: [
      'age', 'clock_timestamp', 'date_bin', 'date_part', 'date_trunc', 'extract', 'isfinite', 'justify_days', 'justify_hours',
      'justify_interval', 'make_date', 'make_interval', 'make_time', 'make_timestamp', 'make_timestamptz', 'now',
      'statement_timestamp', 'timeofday', 'transaction_timestamp', 'to_char', 'to_date', 'to_number', 'to_timestamp', 'timezone',
    ],
  },
  aggregate: {
    reason: 'aggregates over the rows the statement already reads',
    volatility: 's',
    names: [
      'avg', 'bit_and', 'bit_or', 'bit_xor', 'bool_and', 'bool_or', 'count', 'every', 'max', 'min', 'sum', 'string_agg',
      'array_agg', 'stddev', 'stddev_pop', 'stddev_samp', 'variance', 'var_pop', 'var_samp', 'corr', 'covar_pop', 'covar_samp',
      'regr_avgx', 'regr_avgy', 'regr_count', 'regr_intercept', 'regr_r2', 'regr_slope', 'regr_sxx', 'regr_sxy', 'regr_syy',
      'percentile_cont', 'percentile_disc', 'mode', 'json_agg', 'jsonb_agg', 'json_object_agg', 'jsonb_object_agg', 'range_agg',
      'range_intersect_agg',
    ],
  },
  window: {
    reason: 'window functions over the rows the statement already reads',
    volatility: 'i',
    names: ['row_number', 'rank', 'dense_rank', 'percent_rank', 'cume_dist', 'ntile', 'lag', 'lead', 'first_value', 'last_value', 'nth_value'],
  },
  json: {
    reason: 'JSON construction and navigation of their arguments (a row given to them is governed as the columns it holds)',
    volatility: 's',
    names: [
      'to_json', 'to_jsonb', 'row_to_json', 'array_to_json', 'json_build_object', 'jsonb_build_object', 'json_build_array',
      'jsonb_build_array', 'json_object', 'jsonb_object', 'json_array_length', 'jsonb_array_length', 'json_each', 'jsonb_each',
      'json_each_text', 'jsonb_each_text', 'json_extract_path', 'jsonb_extract_path', 'json_extract_path_text',
      'jsonb_extract_path_text', 'json_object_keys', 'jsonb_object_keys', 'json_populate_record', 'jsonb_populate_record',
      'json_populate_recordset', 'jsonb_populate_recordset', 'json_to_record', 'jsonb_to_record', 'json_to_recordset',
      'jsonb_to_recordset', 'json_array_elements', 'jsonb_array_elements', 'json_array_elements_text', 'jsonb_array_elements_text',
      'json_typeof', 'jsonb_typeof', 'jsonb_set', 'jsonb_set_lax', 'jsonb_insert', 'json_strip_nulls', 'jsonb_strip_nulls',
      'jsonb_pretty', 'jsonb_path_exists', 'jsonb_path_match', 'jsonb_path_query', 'jsonb_path_query_array',
      'jsonb_path_query_first', 'jsonb_path_exists_tz', 'jsonb_path_match_tz', 'jsonb_path_query_tz',
      'jsonb_path_query_array_tz', 'jsonb_path_query_first_tz',
    ],
  },
  array: {
    reason: 'array construction and navigation of their arguments, and series generators',
    volatility: 's',
    names: [
      'array_append', 'array_cat', 'array_dims', 'array_fill', 'array_length', 'array_lower', 'array_ndims', 'array_position',
      'array_positions', 'array_prepend', 'array_remove', 'array_replace', 'array_upper', 'cardinality', 'trim_array', 'unnest',
      'generate_series', 'generate_subscripts',
    ],
  },
  conditional: {
    reason: 'count null arguments',
    volatility: 'i',
    names: ['num_nonnulls', 'num_nulls'],
  },
  range: {
    reason: 'range constructors and range bounds of their arguments',
    volatility: 'i',
    names: ['lower_inc', 'upper_inc', 'lower_inf', 'upper_inf', 'isempty', 'range_merge', 'int4range', 'int8range', 'numrange', 'tsrange', 'tstzrange', 'daterange'],
  },
  text_search: {
    reason: 'text search over their arguments (not ts_stat or ts_rewrite, which run SQL given as text)',
    volatility: 's',
    names: [
      'to_tsvector', 'to_tsquery', 'plainto_tsquery', 'phraseto_tsquery', 'websearch_to_tsquery', 'ts_rank', 'ts_rank_cd',
      'ts_headline', 'setweight', 'strip', 'tsvector_to_array', 'array_to_tsvector', 'numnode', 'querytree', 'ts_delete', 'ts_filter',
    ],
  },
  network: {
    reason: 'address arithmetic on inet and cidr arguments',
    volatility: 'i',
    names: ['abbrev', 'broadcast', 'family', 'host', 'hostmask', 'inet_merge', 'inet_same_family', 'masklen', 'netmask', 'network', 'set_masklen'],
  },
  catalog: {
    reason: 'names and definitions from the system catalogs by object id, as psql \\d and drivers ask them; no table data, no sizes or statistics, no view or function bodies',
    volatility: 's',
    names: [
      'pg_table_is_visible', 'pg_type_is_visible', 'pg_function_is_visible', 'pg_collation_is_visible', 'pg_opclass_is_visible',
      'pg_conversion_is_visible', 'pg_operator_is_visible', 'pg_get_userbyid', 'format_type', 'pg_get_expr', 'pg_get_indexdef',
      'pg_get_constraintdef', 'pg_get_function_arguments', 'pg_get_function_result', 'pg_get_function_identity_arguments',
      'pg_get_statisticsobjdef_columns', 'pg_relation_is_publishable', 'pg_encoding_to_char', 'obj_description', 'col_description',
      'shobj_description', 'pg_get_partkeydef', 'pg_get_triggerdef',
    ],
  },
  session: {
    reason: 'the names of the database and schemas the statement runs in (no settings, no server or client details), and the type of an argument',
    volatility: 's',
    names: ['current_database', 'current_schema', 'current_schemas', 'pg_typeof'],
  },
});

/**
 * Operator symbols of pg_catalog (PostgreSQL 15's pg_operator, plus `!=`, which the parser spells `<>`). A symbol outside
 * this set can only be a user-defined operator, and a user-defined operator can call any function.
 */
export const BUILTIN_OPERATORS: ReadonlySet<string> = new Set([
  '!!', '!~', '!~*', '!~~', '!~~*', '#', '##', '#-', '#>', '#>>', '%', '&', '&&', '&<', '&<|', '&>', '*', '*<', '*<=', '*<>',
  '*=', '*>', '*>=', '+', '-', '->', '->>', '-|-', '/', '<', '<->', '<<', '<<=', '<<|', '<=', '<>', '<@', '<^', '=', '>', '>=',
  '>>', '>>=', '>^', '?', '?#', '?&', '?-', '?-|', '?|', '?||', '@', '@-@', '@>', '@?', '@@', '@@@', '^', '^@', '|', '|&>',
  '|/', '|>>', '||', '||/', '~', '~*', '~<=~', '~<~', '~=', '~>=~', '~>~', '~~', '~~*', '!=',
]);

/**
 * Types a value may be cast to: pg_catalog's ordinary base, range and multirange types, and the object-identifier
 * types (`'customers'::regclass`, `atttypid::regtype`: a name looked up in the catalog, no row read; psql and drivers
 * use them). A cast to anything else (a domain, whose CHECK may call any function; a composite or enum of the source)
 * is refused unless a role rule names the type. The parser already qualifies SQL-standard spellings
 * (`integer` → pg_catalog.int4).
 */
export const BUILTIN_CAST_TYPES: ReadonlySet<string> = new Set([
  'bit', 'bool', 'box', 'bpchar', 'bytea', 'char', 'cidr', 'circle', 'date', 'datemultirange', 'daterange', 'float4', 'float8',
  'inet', 'int2', 'int4', 'int4multirange', 'int4range', 'int8', 'int8multirange', 'int8range', 'interval', 'json', 'jsonb',
  'jsonpath', 'line', 'lseg', 'macaddr', 'macaddr8', 'money', 'name', 'numeric', 'nummultirange', 'numrange', 'oid', 'path',
  'point', 'polygon', 'text', 'time', 'timestamp', 'timestamptz', 'timetz', 'tsmultirange', 'tsquery', 'tsrange',
  'tstzmultirange', 'tstzrange', 'tsvector', 'uuid', 'varbit', 'varchar', 'xml',
  'regclass', 'regcollation', 'regconfig', 'regdictionary', 'regnamespace', 'regoper', 'regoperator', 'regproc',
  'regprocedure', 'regrole', 'regtype',
]);

/**
 * Statements whose code the gateway cannot see and no name in a role could allow: an anonymous block, a statement type
 * the classifier does not know. Every front door (and the policy dry-run) refuses them.
 */
export const UNCALLABLE_TRAPS: ReadonlyMap<string, string> = new Map([
  ['do_block', 'DO blocks are not allowed through the gateway: their code is invisible to governance. Put it in a function a source role names.'],
  ['unknown_statement', 'This kind of statement is not known to the gateway and is not allowed.'],
  // catalog-relations.ts: values sampled from every table's columns, whatever the grants and redaction say.
  ['statistics_read', 'Reading planner statistics (pg_stats, pg_statistic and their extended forms) is not allowed through the gateway: they hold values sampled from every table, outside grants and redaction.'],
]);

/** What a statement calls, as written: functions (and procedures), operators, and cast target types. */
export type CallKind = 'function' | 'operator' | 'cast';

/** Why a call is refused unless a role rule names it. */
export type CallRefusal =
  | 'not_allowlisted'
  | 'schema_not_pg_catalog'
  | 'user_operator'
  | 'user_type';

export interface CallInfo {
  readonly kind: CallKind;
  /** The name as written, parts joined by `.` (`lower`, `pg_catalog.lower`, `public.f`, `OPERATOR(public.===)` → `public.===`). */
  readonly name: string;
  /** The unqualified name (last part): what the per-source catalog check looks up. */
  readonly base: string;
  /** Null when the built-in allowlist covers the call (the source's catalog may still narrow it). */
  readonly refusal: CallRefusal | null;
}

const PG_CATALOG = 'pg_catalog';

const FUNCTION_FAMILY = new Map<string, string>();
for (const [family, f] of Object.entries(BUILTIN_FUNCTION_FAMILIES)) for (const n of f.names) FUNCTION_FAMILY.set(n, family);

/** The family of an allowlisted function name (exact, case-sensitive: `"LOWER"` is not `lower`), or undefined. */
export function familyOf(name: string): string | undefined {
  return FUNCTION_FAMILY.get(name);
}

/**
 * Names compare as PostgreSQL stores them: the parser has already folded unquoted identifiers to lower case, and a
 * quoted `"Lower"` is another function. One part, or pg_catalog plus one part, may be a built-in; anything else
 * (another schema, a three-part name) is the source's own.
 */
function judge(parts: readonly string[], builtin: (name: string) => boolean, elsewhere: CallRefusal, unknown: CallRefusal): CallRefusal | null {
  if (parts.length === 0 || parts.length > 2 || (parts.length === 2 && parts[0] !== PG_CATALOG)) return elsewhere;
  return builtin(parts[parts.length - 1] as string) ? null : unknown;
}

function info(kind: CallKind, parts: readonly string[], refusal: CallRefusal | null): CallInfo {
  return { kind, name: parts.join('.'), base: parts[parts.length - 1] ?? '', refusal };
}

export function judgeFunction(parts: readonly string[]): CallInfo {
  return info('function', parts, judge(parts, (n) => FUNCTION_FAMILY.has(n), 'schema_not_pg_catalog', 'not_allowlisted'));
}

export function judgeOperator(parts: readonly string[]): CallInfo {
  return info('operator', parts, judge(parts, (n) => BUILTIN_OPERATORS.has(n), 'user_operator', 'user_operator'));
}

export function judgeCast(parts: readonly string[]): CallInfo {
  return info('cast', parts, judge(parts, (n) => BUILTIN_CAST_TYPES.has(n), 'user_type', 'user_type'));
}

/** A readable reason for audit entries and error messages. */
export function describeRefusal(call: CallInfo): string {
  switch (call.refusal) {
    case 'schema_not_pg_catalog':
      return `function ${call.name} is not a pg_catalog built-in`;
    case 'user_operator':
      return `operator ${call.name} is not a pg_catalog built-in`;
    case 'user_type':
      return `cast to ${call.name}, which is not a pg_catalog built-in type`;
    case 'not_allowlisted':
      return `function ${call.name} is not on the built-in allowlist`;
    default:
      return `${call.kind} ${call.name} is not trusted on this source`;
  }
}
