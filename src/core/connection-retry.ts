import { isConnectionFailure } from '../store/store-errors.js';

/*
 * A write whose connection to the store was cut (PostgreSQL: the session ended by an operator,
 * a failover, a proxy, a network drop) is tried again on a new connection, a few times over
 * some seconds, by the work that holds a lease on what it records: a delivery's result or a
 * webhook attempt's. Given up, the lease would run out and the message or the webhook call go
 * out a second time. The store tells a lost commit from a lost answer (store/pg/
 * pg-commit-outcome.ts), so what is tried again was not stored. SQLite raises no such error:
 * its failures (a full disk) are left to the leases, as before.
 */

/** Pauses between tries, in ms: about 19 s in all, far inside any lease. */
export const CONNECTION_RETRY_PAUSES_MS: readonly number[] = [50, 200, 500, 1000, 2000, 5000, 10_000];

/** Runs `write`, again after each pause while it fails for a lost connection and `goOn()` says so. */
export async function retryOnConnectionLoss<T>(write: () => Promise<T>, goOn: () => boolean = () => true): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await write();
    } catch (err) {
      if (!isConnectionFailure(err) || i >= CONNECTION_RETRY_PAUSES_MS.length || !goOn()) throw err;
      await new Promise((resolve) => setTimeout(resolve, CONNECTION_RETRY_PAUSES_MS[i]));
    }
  }
}
