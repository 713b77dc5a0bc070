// Transaction state kept identical on both sides of the gateway: a statement the gateway answers with an error also fails upstream, so PostgreSQL itself holds the aborted state it reports in ReadyForQuery.
import { parseMessage, queryMessage } from './protocol.js';

/**
 * What the upstream runs in place of a statement the gateway refused (docs/pgwire.md, "Transactions"). PostgreSQL
 * answers an error it would have given for the refused statement itself in every state: inside a transaction block
 * the block is aborted (25P02 for what follows, COMMIT answers ROLLBACK); in an aborted block it answers 25P02; in an
 * implicit transaction (a multi-statement query, an extended-protocol batch before Sync) the work before it is rolled
 * back, as PostgreSQL rolls it back when one of its statements fails. The cast fails during parse analysis: it needs no
 * privilege, reads no table and names nothing a client could have created, and the server's log says why it failed.
 */
export const REFUSAL_SQL = "SELECT 'gatehouse: statement refused by the gateway'::pg_catalog.int4";

/** The simple-protocol form: one Query message, answered ErrorResponse then ReadyForQuery. */
export const REFUSAL_QUERY: Buffer = queryMessage(REFUSAL_SQL);

/**
 * The extended-protocol form: a Parse that fails before anything is stored. It is named so the client's unnamed
 * statement survives (an unnamed Parse drops it first); PostgreSQL then skips to the client's Sync, as it would have
 * after the refused message.
 */
export const REFUSAL_PARSE: Buffer = parseMessage('gatehouse_refused', REFUSAL_SQL);

/** ReadyForQuery's transaction status bytes. */
export const enum TxStatus {
  Idle = 0x49, // 'I'
  InBlock = 0x54, // 'T'
  Failed = 0x45, // 'E'
}
