// The one closed error vocabulary (spec, Errors). Each edge translates it: HTTP status and
// {error:{code,message}} in api/, SMTP reply codes in smtp/.
export type ErrorCode =
  | 'BAD_REQUEST'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'NOT_UNIQUE'
  | 'RATE_LIMITED'
  | 'PAYLOAD_TOO_LARGE'
  | 'QUERY_TOO_SLOW'
  | 'INTERNAL_SERVER_ERROR';

/** The HTTP status the spec gives each code; both HTTP edges (the API and the console) answer with it. */
export const HTTP_STATUS: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  NOT_UNIQUE: 409,
  PAYLOAD_TOO_LARGE: 413,
  QUERY_TOO_SLOW: 422,
  RATE_LIMITED: 429,
  INTERNAL_SERVER_ERROR: 500,
};

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Seconds until a retry may succeed (RATE_LIMITED). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const badRequest = (message: string) => new AppError('BAD_REQUEST', message);
export const notFound = (message: string) => new AppError('NOT_FOUND', message);
export const forbidden = (message: string) => new AppError('FORBIDDEN', message);
export const notUnique = (message: string) => new AppError('NOT_UNIQUE', message);

/**
 * The store could not take the write (disk full, I/O error, the database server out of reach or locked past its timeout). Nothing of the request was
 * stored, so nothing was accepted: a 500 with the spec's INTERNAL_SERVER_ERROR (the spec's
 * closed table pairs that code with 500), saying so plainly so the client retries later
 * (safely, with an Idempotency-Key).
 */
export const storageUnavailable = () =>
  new AppError('INTERNAL_SERVER_ERROR', 'the server could not store this request (its storage is full, failing, busy or out of reach); nothing was accepted, retry later');

/**
 * A read on behalf of the request ran past store.statementTimeout and was cancelled (nothing was
 * written): 422 with the spec's code BAD_REQUEST, since the same request would run as long again;
 * a narrower filter or search is what helps.
 */
export const queryTooSlow = () =>
  new AppError('QUERY_TOO_SLOW', 'the query took too long and was stopped (store.statementTimeout); narrow the filter or search and try again');
