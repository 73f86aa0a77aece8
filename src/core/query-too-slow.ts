import { queryTooSlow } from './errors.js';
import { isStatementTimeout } from '../store/store-errors.js';

/** A read the store stopped at store.statementTimeout becomes the clear 422 "narrow it" (errors.ts). */
export async function orTooSlow<T>(read: Promise<T>): Promise<T> {
  try {
    return await read;
  } catch (err) {
    if (isStatementTimeout(err)) throw queryTooSlow();
    throw err;
  }
}
