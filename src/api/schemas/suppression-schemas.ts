import { z } from 'zod';
import { SUPPRESSION_REASONS } from '../../core/suppressions/suppression-service.js';
import { count, timestamp } from './common-schemas.js';

export const suppressionSchema = z
  .strictObject({
    email: z.string(),
    reason: z.enum(SUPPRESSION_REASONS),
    source: z.string().nullable(),
    createdAt: timestamp,
  })
  .meta({ id: 'Suppression' });

export const suppressionRemovedSchema = z.strictObject({ email: z.string(), success: z.boolean() });
export const suppressionBulkAddedSchema = z.strictObject({
  success: z.boolean(),
  count: count.meta({ description: 'Addresses newly listed.' }),
  alreadySuppressed: count,
});
