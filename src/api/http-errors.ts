import { AppError, HTTP_STATUS } from '../core/errors.js';

// The HTTP edge's translator for the closed error vocabulary (spec, Errors).
export interface HttpError {
  status: number;
  body: { error: { code: string; message: string } };
  retryAfterSeconds?: number;
}

export function toHttpError(err: unknown): HttpError {
  if (err instanceof AppError) {
    // An oversized body is 413, a query stopped by its timeout 422, both with a spec code on the wire (architecture.md, Decisions: errors).
    const code = err.code === 'PAYLOAD_TOO_LARGE' || err.code === 'QUERY_TOO_SLOW' ? 'BAD_REQUEST' : err.code;
    return { status: HTTP_STATUS[err.code], body: { error: { code, message: err.message } }, retryAfterSeconds: err.retryAfterSeconds };
  }
  return { status: 500, body: { error: { code: 'INTERNAL_SERVER_ERROR', message: 'something unexpected happened' } } };
}
