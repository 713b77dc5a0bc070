// The settings a client's startup packet asks for (its parameters and `options`' -c switches): which the upstream session takes, bounded where the operator caps them, and which are refused because they could escape governance.
import { durationMs, settingChangeTraps } from '../../governance/sql/functions.js';
import { parsePathText } from '../../governance/sql/search-path.js';
import type { ErrorFields } from './protocol.js';

/** Startup parameters that are not settings: the login's own, or protocol extensions (`_pq_.*`), which are not offered. */
const NOT_SETTINGS: ReadonlySet<string> = new Set(['user', 'database', 'options', 'client_encoding']);

/**
 * Settings refused at startup beyond what a `SET` statement is refused for (settingChangeTraps: role,
 * session_authorization, search_path, client_encoding, standard_conforming_strings): session_replication_role =
 * replica turns off triggers and foreign keys for an upstream user allowed to set it.
 */
const REFUSED_AT_STARTUP: ReadonlySet<string> = new Set(['session_replication_role', 'replication']);

const MAX_SETTINGS = 64;
const MAX_VALUE_LENGTH = 1024;

export type StartupSettings = { ok: true; settings: Array<[string, string]> } | { ok: false; error: Omit<ErrorFields, 'severity'> };

/**
 * The settings to apply, in order: every startup parameter, then `options`' switches (as PostgreSQL applies them;
 * a later one wins). `application_name` is always set (empty when the client sent none), since the upstream
 * connection's own name is the gateway's. `statement_timeout` is at most `maxStatementTimeoutMs` (the source's
 * `statement_timeout_ms`), 0 (none) included.
 */
export function startupSettings(params: Readonly<Record<string, string>>, maxStatementTimeoutMs: number): StartupSettings {
  const pairs: Array<[string, string]> = [];
  for (const [name, value] of Object.entries(params)) {
    if (NOT_SETTINGS.has(name) || name.startsWith('_pq_.')) continue;
    pairs.push([name, value]);
  }
  if (params.options !== undefined) {
    const parsed = optionSwitches(params.options);
    if (!parsed.ok) return parsed;
    pairs.push(...parsed.settings);
  }
  if (pairs.length > MAX_SETTINGS) return refuse('22023', `too many startup settings (at most ${MAX_SETTINGS})`);
  const out = new Map<string, [string, string]>();
  out.set('application_name', ['application_name', '']);
  for (const [rawName, value] of pairs) {
    const name = rawName.toLowerCase();
    if (value.length > MAX_VALUE_LENGTH || name.length > 63) return refuse('22023', `startup setting "${rawName.slice(0, 63)}" is too long`);
    const problem = escapeProblem(name, value);
    if (problem !== null) return refuse('42501', `startup setting "${rawName.slice(0, 63)}" cannot be set through the gateway: ${problem}`);
    if (name === 'statement_timeout') {
      const ms = durationMs(value);
      if (ms === null) return refuse('22023', `invalid value for parameter "statement_timeout": "${value.slice(0, 64)}"`);
      out.set(name, [rawName, String(ms === 0 ? maxStatementTimeoutMs : Math.min(ms, maxStatementTimeoutMs))]);
      continue;
    }
    out.set(name, [rawName, value]);
  }
  return { ok: true, settings: [...out.values()] };
}

/** Why a startup setting could escape governance, or null. */
function escapeProblem(name: string, value: string): string | null {
  if (REFUSED_AT_STARTUP.has(name)) return 'it could bypass the database\'s own checks or the gateway\'s session';
  // search_path: the session tracks it and governs unqualified names along it (docs/pgwire.md "search_path").
  if (name === 'search_path') return parsePathText(value) !== null ? null : 'it is not a list of schema names';
  const traps = settingChangeTraps(name, value);
  return traps.length === 0 ? null : `the same SET is refused (${traps.join(', ')})`;
}

/**
 * PostgreSQL's `options` startup parameter: switches separated by unescaped whitespace (a backslash escapes the next
 * character), `-c name=value`, `-cname=value` or `--name=value`; any other backend switch is refused.
 */
function optionSwitches(options: string): StartupSettings {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  for (let i = 0; i < options.length; i++) {
    const ch = options[i]!;
    if (ch === '\\' && i + 1 < options.length) {
      word += options[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  const settings: Array<[string, string]> = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    let assignment: string | undefined;
    if (w === '-c') assignment = words[++i];
    else if (w.startsWith('-c')) assignment = w.slice(2);
    else if (w.startsWith('--')) assignment = w.slice(2);
    else return refuse('22023', `startup option "${w.slice(0, 32)}" is not supported through the gateway (only -c name=value)`);
    const eq = assignment?.indexOf('=') ?? -1;
    if (assignment === undefined || eq <= 0) return refuse('22023', `-c option needs name=value`);
    settings.push([assignment.slice(0, eq).replace(/-/g, '_'), assignment.slice(eq + 1)]);
  }
  return { ok: true, settings };
}


function refuse(sqlstate: string, message: string): StartupSettings {
  return { ok: false, error: { sqlstate, message } };
}
