import { z } from 'zod';
import { count, day } from './common-schemas.js';

const counts = {
  sent: count,
  delivered: count,
  opened: count.meta({ description: 'Emails opened by a person (first open each), not counting opens flagged as a machine\'s.' }),
  clicked: count.meta({ description: 'Emails clicked by a person (first click each), not counting clicks flagged as a machine\'s.' }),
  bounced: count,
  complained: count,
  machineOpened: count.meta({ description: 'Emails opened by a privacy proxy or scanner (first such open each); an email may be in both.' }),
  machineClicked: count.meta({ description: 'Emails whose links a scanner followed (first such click each); an email may be in both.' }),
};

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
