// createApp opens the store (a SQLite connection and its checkpoint worker thread, or a
// PostgreSQL pool) before the steps that can still fail: the migrations, reading outbound.caFile.
// A failure there must close what was opened, or the process that asked can never end (an admin
// command, a test's worker) and a caller that retries piles up connections.

/** What `build` registered with `onFailure` is closed, newest first, when it throws; its error is the one thrown. */
export async function closingOnFailure<T>(build: (onFailure: (close: () => Promise<unknown>) => void) => Promise<T>): Promise<T> {
  const closers: (() => Promise<unknown>)[] = [];
  try {
    return await build((close) => closers.push(close));
  } catch (err) {
    // A close that fails too is not reported: the first error is what the caller needs to see.
    for (const close of closers.reverse()) await close().catch(() => undefined);
    throw err;
  }
}
