// Errors of the storage itself, as opposed to errors of a query: the disk is full or the
// file cannot be written. Edges translate them into a clear "not stored, retry later"
// answer instead of a generic failure (the composition root wires this in; store/ stays
// the only place that knows SQLite's error codes).

/** better-sqlite3 error codes (extended codes included) that mean "the storage failed, not the query". */
const STORAGE_CODES = /^SQLITE_(FULL|IOERR|READONLY|CANTOPEN|CORRUPT|NOTADB)(_|$)/;

/** True for a write that failed because the database could not grow or be written (disk full, I/O error). */
export function isStorageFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (STORAGE_CODES.test(code) || code === 'ENOSPC' || code === 'EDQUOT' || code === 'EIO');
}
