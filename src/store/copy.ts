// COPY … FROM STDIN on one pooled PostgreSQL connection: the store's bulk-load primitive, bounded by a deadline that destroys the connection it abandons.
import pg from 'pg';
import pgCopy from 'pg-copy-streams';
import { StoreUnavailableError, translateConnectionError } from './errors.js';

/**
 * Streams `data`, already in the statement's COPY format, through `statement` (a `COPY … FROM STDIN`) and resolves
 * with the number of rows stored. COPY is one statement: when it fails, nothing is stored. An error the server
 * reports rejects as a query's would (the driver's error, SQLSTATE in `code`); a lost connection, a closed store or
 * a missed deadline rejects with StoreUnavailableError.
 */
export type CopyIn = (statement: string, data: Buffer | string, timeoutMs: number) => Promise<number>;

/**
 * A CopyIn over `pool`. The connection is held from checkout to the server's ReadyForQuery. It goes back to the pool
 * after success and after an error the server reported (the protocol leaves it in sync: the server drops any CopyData
 * still in flight); it is destroyed after anything else, a missed deadline included, since a hung COPY would
 * otherwise hold it and its server backend forever. Destroying it mid-COPY makes the server abort the statement.
 * @see https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-COPY
 */
export function poolCopyIn(pool: Pick<pg.Pool, 'connect'>, target: string): CopyIn {
  return (statement, data, timeoutMs) =>
    new Promise<number>((resolve, reject) => {
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

      pool.connect().then(
        (c) => {
          // The deadline passed while the pool was busy: the connection was never used, so it goes back as it is.
          if (settled) return c.release();
          client = c;
          c.on('error', onClientError);
          const stream = c.query(pgCopy.from(statement));
          stream.on('error', (error: unknown) => {
            const unavailable = translateConnectionError(error, target);
            settle(unavailable ?? error, 0, unavailable !== null || !(error instanceof pg.DatabaseError));
          });
          // 'finish' follows the server's ReadyForQuery: the rows are committed and visible.
          stream.on('finish', () => settle(null, stream.rowCount, false));
          // One write, so one CopyData message flushed whole on CopyInResponse: pg-copy-streams flushes further chunks
          // on 'drain' through a connection it clears on error, which would throw outside any handler.
          stream.end(data);
        },
        (error: unknown) => settle(translateConnectionError(error, target) ?? error, 0, false),
      );
    });
}
