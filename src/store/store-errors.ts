// Errors of the storage itself, as opposed to errors of a query: the disk is full or the
// file cannot be written, or the database server cannot be reached. Edges translate them into
// a clear "not stored, retry later" answer instead of a generic failure (the composition root
// wires this in; store/ stays the only place that knows the engines' error codes).

/** better-sqlite3 error codes (extended codes included) that mean "the storage failed, not the query". */
const STORAGE_CODES = /^SQLITE_(FULL|IOERR|READONLY|CANTOPEN|CORRUPT|NOTADB)(_|$)/;
/** SQLite stayed locked by another connection (a CLI command) past the busy timeout. */
const LOCK_CODES = /^SQLITE_(BUSY|LOCKED)(_|$)/;

/** True when SQLite gave up waiting for a lock another connection holds (busy timeout). */
export function isSqliteLockTimeout(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && LOCK_CODES.test(code);
}

/**
 * PostgreSQL SQLSTATE classes and codes that mean the same: 08 connection exception, 53
 * insufficient resources (53100 disk full), 57P01-57P03 the server is shutting down or starting,
 * 58 system errors (I/O), XX001/XX002 corrupted data or index; and the transient conflicts a
 * retry gets past: 40001 serialization failure, 40P01 deadlock, 55P03 lock not available,
 * 57014 a statement cancelled (a statement_timeout set on the server).
 */
const PG_STORAGE_STATES = /^(08...|53...|57P0[1-3]|58...|XX00[12]|40001|40P01|55P03|57014)$/;

/** Socket-level failures of a connection to the database server. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** node-postgres reports a lost or unobtainable connection with these messages (no code). */
const PG_CONNECTION_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection terminated unexpectedly|Client was closed)/;

/** True when the database server could not be reached or dropped the connection. */
export function isConnectionFailure(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  if (typeof e.code === 'string' && (SOCKET_CODES.has(e.code) || /^(08...|57P0[1-3])$/.test(e.code))) return true;
  return typeof e.message === 'string' && PG_CONNECTION_MESSAGES.test(e.message);
}

/** True for a write that failed because the store could not be written or reached (disk full, I/O error, server gone), or for a conflict a retry gets past. */
export function isStorageFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (STORAGE_CODES.test(code) || LOCK_CODES.test(code) || code === 'ENOSPC' || code === 'EDQUOT' || code === 'EIO' || PG_STORAGE_STATES.test(code))) return true;
  return isConnectionFailure(err);
}

/**
 * True when a write was refused by a unique index or primary key (of `table`, when given): the
 * guarantee some callers rely on (a campaign reaches a contact once, a name exists once).
 */
export function isUniqueViolation(err: unknown, table?: string): boolean {
  const e = err as { code?: unknown; message?: unknown; table?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  // PostgreSQL: SQLSTATE 23505, with the table named on the error.
  if (e.code === '23505') return table === undefined || e.table === table;
  // SQLite: "UNIQUE constraint failed: <table>.<column>, ..." (primary keys included).
  const message = typeof e.message === 'string' ? e.message : '';
  const m = /UNIQUE constraint failed: ([A-Za-z0-9_]+)\./.exec(message);
  return m !== null && (table === undefined || m[1] === table);
}

/**
 * True when a write was refused by a foreign key (a row of `table`, when given, naming a parent
 * that is gone): a create that checked its parent first, then lost a race with the parent's
 * deletion.
 */
export function isForeignKeyViolation(err: unknown, table?: string): boolean {
  const e = err as { code?: unknown; message?: unknown; table?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  // PostgreSQL: SQLSTATE 23503, with the referencing table named on the error.
  if (e.code === '23503') return table === undefined || e.table === table;
  // SQLite names no table: "FOREIGN KEY constraint failed".
  return e.code === 'SQLITE_CONSTRAINT_FOREIGNKEY' || (typeof e.message === 'string' && e.message.startsWith('FOREIGN KEY constraint failed'));
}

/**
 * A campaign message whose contact, checked again inside the write's transaction, is no longer
 * to be mailed (unsubscribed, suppressed or deleted since the audience was read): nothing of it
 * was stored. Not a failure: the contact is skipped as one who left before the read would be.
 */
export class RecipientGoneError extends Error {
  constructor(readonly contactId: string) {
    super(`contact ${contactId} is no longer subscribed`);
    this.name = 'RecipientGoneError';
  }
}

export const isRecipientGone = (err: unknown): err is RecipientGoneError => err instanceof RecipientGoneError;

/**
 * A read served on behalf of a request ran past store.statementTimeout and was cancelled
 * (bounded-read.ts): the request asks too much of the database, nothing was written.
 */
export class StatementTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`the query ran longer than store.statementTimeout (${timeoutMs} ms) and was cancelled`);
    this.name = 'StatementTimeoutError';
  }
}

export const isStatementTimeout = (err: unknown): err is StatementTimeoutError => err instanceof StatementTimeoutError;
