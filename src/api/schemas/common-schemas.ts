import { z } from 'zod';
import { MAX_INT_ID } from '../../core/int-id.js';

// Shapes shared by the response schemas. Response schemas are never parsed at runtime: they
// are the OpenAPI document's 200 bodies and the handlers' compile-time return types, and the
// proof tour (test/proof/openapi.test.ts) validates real responses against them. Objects whose
// fields are fully known are strict, so a renamed, missing or extra field fails the tour.
// Schemas with a meta id become components of the document.

/** A timestamp we produce (Date#toISOString: UTC, milliseconds, Z). */
export const timestamp = z.iso.datetime().meta({ id: 'Timestamp', description: 'ISO 8601 in UTC, e.g. 2026-01-31T09:00:00.000Z.' });
/** A calendar day, YYYY-MM-DD. */
export const day = z.iso.date();
export const intId = z.int().min(1).max(MAX_INT_ID);
export const count = z.int().min(0);
/** A map of string to string (properties, headers, variables). */
export const stringMap = z.record(z.string(), z.string());

/** The one error body (spec, Errors); 413 keeps the spec code BAD_REQUEST on the wire. */
export const ERROR_CODES = ['BAD_REQUEST', 'UNAUTHORIZED', 'FORBIDDEN', 'NOT_FOUND', 'METHOD_NOT_ALLOWED', 'NOT_UNIQUE', 'RATE_LIMITED', 'INTERNAL_SERVER_ERROR'] as const;
export const errorSchema = z
  .strictObject({
    error: z.strictObject({
      code: z.enum(ERROR_CODES),
      message: z.string().min(1).meta({ description: 'What went wrong, starting with the offending field where there is one.' }),
    }),
  })
  .meta({ id: 'Error', description: 'Every 4xx and 5xx answer.' });

/** The spec's page-numbered envelope: items under `key`, then page, limit, total, totalPage, hasMore. */
export function pageEnvelopeSchema<K extends string, T extends z.ZodType>(key: K, item: T) {
  return z.strictObject({
    ...({ [key]: z.array(item) } as { [P in K]: z.ZodArray<T> }),
    page: z.int().min(1),
    limit: z.int().min(1).max(100),
    total: count,
    totalPage: count,
    hasMore: z.boolean().meta({ description: 'Whether a next page exists; loop while true.' }),
  });
}

/** { id, success, message } of a delete (spec: domains, contact books). */
export function deletedSchema<T extends z.ZodType>(id: T) {
  return z.strictObject({ id, success: z.boolean(), message: z.string() });
}

/** { success, count } of the bulk removals. */
export const bulkCountSchema = z.strictObject({ success: z.boolean(), count });
