import { z } from 'zod';
import { count, timestamp } from './common-schemas.js';

export const CAMPAIGN_STATUSES = ['DRAFT', 'SCHEDULED', 'RUNNING', 'PAUSED', 'SENT'] as const;

export const campaignSchema = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    from: z.string(),
    subject: z.string(),
    previewText: z.string().nullable(),
    contactBookId: z.string(),
    segmentId: z.string().nullable().meta({ description: 'Send only to the contacts this segment matches; null for the whole book.' }),
    content: z.string().nullable(),
    html: z.string().nullable(),
    status: z.enum(CAMPAIGN_STATUSES),
    scheduledAt: timestamp.nullable(),
    batchSize: z.int().min(1),
    batchWindowMinutes: z.int().min(0),
    openTracking: z.boolean().nullable().meta({ description: "Open tracking of the campaign's emails; null when the sending domain's openTracking decides." }),
    clickTracking: z.boolean().nullable().meta({ description: "Click tracking of the campaign's emails; null when the sending domain's clickTracking decides." }),
    total: count,
    sent: count,
    delivered: count,
    opened: count,
    clicked: count,
    bounced: count,
    hardBounced: count,
    complained: count,
    unsubscribed: count,
    machineOpened: count.meta({ description: 'Emails of the campaign opened by a machine (a privacy proxy fetching images on arrival); opened counts people only.' }),
    machineClicked: count.meta({ description: 'Emails of the campaign whose links a machine (a link scanner) followed; clicked counts people only.' }),
    replyTo: z.array(z.string()),
    cc: z.array(z.string()),
    bcc: z.array(z.string()),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Campaign' });

/** schedule, pause and resume. */
export const campaignActionSchema = z.strictObject({ success: z.boolean(), campaign: campaignSchema });
