// Session resets on a wire session (DISCARD ALL, RESET ALL, RESET ROLE, …): what each one undid of the session's governed state, and the messages that re-apply it before the client's next statement can run (docs/pgwire.md "Session resets").
import { guardedParse } from '../../governance/sql/parser.js';
import { Frontend, bindMessage, executeMessage, message, parseMessage, queryMessage } from './protocol.js';
import { quoteLiteral } from '../../connectors/postgres-exec.js';

/** What the gateway set on the upstream session after login, on top of the connection's startup options. */
export interface GovernedSessionState {
  /** `SET ROLE` of the identity's mapped_pg_role, or null (the upstream login role itself). */
  readonly role: string | null;
  /** The client's startup settings as applied (startup-settings.ts), in order. */
  readonly settings: ReadonlyArray<readonly [string, string]>;
}

/**
 * What one statement reset: the role (DISCARD ALL, RESET ROLE, SET ROLE NONE, RESET/SET … SESSION AUTHORIZATION
 * DEFAULT), every setting (RESET ALL, DISCARD ALL — `role` is not among them: PostgreSQL marks it GUC_NO_RESET_ALL),
 * or one setting (`RESET name`, `SET name TO DEFAULT`). The connection's startup options (UTF8, standard conforming
 * strings, search_path, the source's statement_timeout) come back by themselves: they are what RESET restores.
 */
export interface ResetEffect {
  role: boolean;
  /** 'all', or the lower-case names of the settings reset. */
  settings: 'all' | string[];
  /** DISCARD ALL also deallocates every prepared statement and closes every portal. */
  dropsNames: boolean;
}

const REAPPLY_NAME = 'gatehouse_reapply';

/** The reset a statement's text makes, or null when it resets nothing of the governed state. */
export function resetEffect(sql: string): ResetEffect | null {
  const parsed = guardedParse(sql);
  // The classifier already parsed this text; unparseable text never gets here.
  if (!parsed.ok) return { role: true, settings: 'all', dropsNames: true };
  type Json = Record<string, unknown>;
  const stmts = (parsed.tree as { stmts?: { stmt?: Json }[] }).stmts ?? [];
  const effect: ResetEffect = { role: false, settings: [], dropsNames: false };
  for (const { stmt } of stmts) {
    const discard = stmt?.DiscardStmt as Json | undefined;
    if (discard?.target === 'DISCARD_ALL') Object.assign(effect, { role: true, settings: 'all', dropsNames: true });
    const set = stmt?.VariableSetStmt as Json | undefined;
    if (set === undefined) continue;
    const kind = String(set.kind ?? '');
    const name = String(set.name ?? '').toLowerCase();
    if (kind === 'VAR_RESET_ALL') effect.settings = 'all';
    else if (name === 'role' || name === 'session_authorization') effect.role = true;
    else if ((kind === 'VAR_RESET' || kind === 'VAR_SET_DEFAULT') && effect.settings !== 'all') effect.settings.push(name);
  }
  return effect.role || effect.dropsNames || effect.settings === 'all' || effect.settings.length > 0 ? effect : null;
}

/**
 * One statement that puts back what `effect` undid: `set_config` calls in a single SELECT, so that it can also run as
 * one extended-protocol statement inside the client's batch. set_config(…, false) is SET: it lasts for the session,
 * and a rollback of the transaction it ran in reverts it together with the reset before it. Null when nothing needs
 * re-applying (a reset of a setting the client did not set at startup).
 */
export function reapplySql(state: GovernedSessionState, effect: ResetEffect): string | null {
  const calls: string[] = [];
  if (effect.role) calls.push(`pg_catalog.set_config('role', ${quoteLiteral(state.role ?? 'none')}, false)`);
  for (const [name, value] of state.settings) {
    if (effect.settings === 'all' || effect.settings.includes(name.toLowerCase())) {
      calls.push(`pg_catalog.set_config(${quoteLiteral(name)}, ${quoteLiteral(value)}, false)`);
    }
  }
  return calls.length === 0 ? null : `SELECT ${calls.join(', ')}`;
}

/** The simple-protocol form: a Query of its own right behind the client's (RowDescription, DataRow, CommandComplete, ReadyForQuery). */
export function reapplyQuery(sql: string): Buffer {
  return queryMessage(sql);
}

/**
 * The extended-protocol form, placed right behind the client's Execute inside its batch: Parse, Bind and Execute of a
 * gateway-named statement and portal, then Close of both, so no client name is touched. Answered by five completion
 * messages (ParseComplete, BindComplete, CommandComplete, CloseComplete ×2) and a DataRow.
 */
export function reapplyExtended(sql: string): Buffer {
  return Buffer.concat([
    parseMessage(REAPPLY_NAME, sql),
    bindMessage(REAPPLY_NAME, REAPPLY_NAME, []),
    executeMessage(REAPPLY_NAME, 0),
    message(Frontend.Close, Buffer.concat([Buffer.from('P'), cstr(REAPPLY_NAME)])),
    message(Frontend.Close, Buffer.concat([Buffer.from('S'), cstr(REAPPLY_NAME)])),
  ]);
}

/** How many completion messages answer reapplyExtended. */
export const REAPPLY_EXTENDED_COMPLETIONS = 5;

function cstr(s: string): Buffer {
  return Buffer.from(`${s}\u0000`, 'utf8');
}
