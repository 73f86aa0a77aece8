import { z } from 'zod';
import { FILTER_OPS } from '../../core/segments/segment-filters.js';
import { intId, timestamp } from './common-schemas.js';

export const segmentFilterConditionSchema = z
  .strictObject({
    field: z.string().meta({ description: 'email, firstName, lastName, subscribed, createdAt or properties.<name>' }),
    op: z.enum(FILTER_OPS),
    value: z.union([z.string(), z.number(), z.boolean(), z.array(z.string())]).optional(),
  })
  .meta({ id: 'SegmentFilterCondition' });

export const segmentFilterGroupSchema = z
  .strictObject({
    match: z.enum(['all', 'any']),
    get conditions(): z.ZodArray<z.ZodUnion<[typeof segmentFilterConditionSchema, typeof segmentFilterGroupSchema]>> {
      return z.array(z.union([segmentFilterConditionSchema, segmentFilterGroupSchema]));
    },
  })
  .meta({ id: 'SegmentFilterGroup', description: 'Conditions combined with all (AND) or any (OR); groups nest.' });

export const segmentSchema = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    teamId: intId,
    contactBookId: z.string(),
    filters: segmentFilterGroupSchema,
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Segment' });
