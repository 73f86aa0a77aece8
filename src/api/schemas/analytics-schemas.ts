import { z } from 'zod';
import { count, day } from './common-schemas.js';

const counts = { sent: count, delivered: count, opened: count, clicked: count, bounced: count, complained: count };

export const timeSeriesSchema = z.strictObject({
  result: z.array(z.strictObject({ date: day, ...counts })).meta({ description: 'One point per day, oldest first.' }),
  totalCounts: z.strictObject(counts),
});

export const reputationSchema = z.strictObject({
  delivered: count,
  hardBounced: count,
  complained: count,
  bounceRate: z.number().min(0).meta({ description: 'Hard bounces as a percentage of delivered.' }),
  complaintRate: z.number().min(0).meta({ description: 'Complaints as a percentage of delivered.' }),
});
