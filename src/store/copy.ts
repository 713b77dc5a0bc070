// COPY … FROM STDIN on one pooled PostgreSQL connection: the store's bulk-load primitive, bounded by a deadline that destroys the connection it abandons.
import pg from 'pg';
import pgCopy from 'pg-copy-streams';
import { StoreUnavailableError, translateConnectionError } from './errors.js';

/** One `COPY … FROM STDIN` statement and its data, already in the statement's COPY format. */
export interface CopyPart {
  readonly statement: string;
  readonly data: Buffer | string;
}

/**
 * Streams each part's data through its statement, in order, on one connection and in one transaction, then runs
 * `after` (SQL statements, such as a batch's seal) in that transaction, and resolves with the number of rows the parts
 * stored. It commits whole or not at all: when anything fails, nothing is stored. An error the server reports rejects
 * as a query's would (the driver's error, SQLSTATE in `code`); a lost connection, a closed store or a missed deadline
 * rejects with StoreUnavailableError.
 */
export type CopyIn = (parts: readonly CopyPart[], timeoutMs: number, after?: string) => Promise<number>;

/**
 * The simple-query text of each part: one part carries `after` in its own implicit transaction; several open an
 * explicit one with the first and close it with the last, `after` before its COMMIT. A text's statements after the
 * COPY run once its data is in; pg-copy-streams counts only the `COPY n` completion among them.
 */
export function copyTexts(parts: readonly CopyPart[], after?: string): string[] {
  const tail = after === undefined ? '' : `; ${after}`;
  if (parts.length === 1) return [`${parts[0]!.statement}${tail}`];
  return parts.map((p, i) => `${i === 0 ? 'begin; ' : ''}${p.statement}${i === parts.length - 1 ? `${tail}; commit` : ''}`);
}

/**
 * A CopyIn over `pool`. The connection is held from checkout to the last part's ReadyForQuery. It goes back to the
 * pool after success and after an error the server reported (the protocol leaves it in sync: the server drops any
 * CopyData still in flight), once an explicit transaction the error left open is rolled back; it is destroyed after
 * anything else, a missed deadline included, since a hung COPY would otherwise hold it and its server backend
 * forever. Destroying it mid-COPY makes the server abort the transaction.
 * @see https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-COPY
 */
export function poolCopyIn(pool: Pick<pg.Pool, 'connect'>, target: string): CopyIn {
  return (parts, timeoutMs, after) =>
    new Promise<number>((resolve, reject) => {
      if (parts.length === 0) return reject(new RangeError('a COPY needs at least one part'));
      const texts = copyTexts(parts, after);
      let settled = false;
      let client: pg.PoolClient | null = null;
      // A checked-out client losing its server emits 'error' on itself; unheard, that stops the process. The copy
      // stream reports the same failure, so this listener only has to exist.
      const onClientError = (): void => undefined;
      const settle = (error: unknown, rows: number, destroy: boolean): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (client) {
          // release(true) ends the client, and pg ends a client with an active query by destroying its socket. A
          // destroyed client keeps the listener: its socket may still report the end after this.
          client.release(destroy ? true : undefined);
          if (!destroy) client.removeListener('error', onClientError);
        }
        if (error === null) resolve(rows);
        else reject(error as Error);
      };
      const timer = setTimeout(() => {
        settle(new StoreUnavailableError(`control store unavailable (${target}): COPY not answered within ${timeoutMs} ms`, 'timeout'), 0, true);
      }, timeoutMs);

      /** A server-reported error: an explicit transaction it left open is rolled back before the connection goes back. */
      const refused = (c: pg.PoolClient, error: unknown): void => {
        if (texts.length === 1) return settle(error, 0, false);
        c.query('rollback').then(
          () => settle(error, 0, false),
          () => settle(error, 0, true),
        );
      };
      let rows = 0;
      const next = (c: pg.PoolClient, i: number): void => {
        if (settled) return;
        const stream = c.query(pgCopy.from(texts[i]!));
        stream.on('error', (error: unknown) => {
          const unavailable = translateConnectionError(error, target);
          if (unavailable !== null || !(error instanceof pg.DatabaseError)) settle(unavailable ?? error, 0, true);
          else refused(c, error);
        });
        // 'finish' follows the server's ReadyForQuery: after the last part the rows are committed and visible.
        stream.on('finish', () => {
          rows += stream.rowCount;
          if (i + 1 < texts.length) next(c, i + 1);
          else settle(null, rows, false);
        });
        // One write, so one CopyData message flushed whole on CopyInResponse: pg-copy-streams flushes further chunks
        // on 'drain' through a connection it clears on error, which would throw outside any handler.
        stream.end(parts[i]!.data);
      };

      pool.connect().then(
        (c) => {
          // The deadline passed while the pool was busy: the connection was never used, so it goes back as it is.
          if (settled) return c.release();
          client = c;
          c.on('error', onClientError);
          next(c, 0);
        },
        (error: unknown) => settle(translateConnectionError(error, target) ?? error, 0, false),
      );
    });
}
