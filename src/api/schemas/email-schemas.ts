import { z } from 'zod';
import { EMAIL_STATUS_ORDER } from '../../core/emails/email-status.js';
import { count, intId, timestamp } from './common-schemas.js';

const emailStatus = z.enum(EMAIL_STATUS_ORDER);
const addresses = z.union([z.string(), z.array(z.string())]);

export const emailIdSchema = z.strictObject({ emailId: z.string() });

export const batchResultSchema = z.strictObject({ data: z.array(emailIdSchema).meta({ description: 'One entry per batch item, in request order.' }) });

export const emailListItemSchema = z
  .strictObject({
    id: z.string(),
    to: addresses,
    replyTo: addresses.nullable(),
    cc: addresses.nullable(),
    bcc: addresses.nullable(),
    from: z.string(),
    subject: z.string(),
    html: z.string().nullable(),
    text: z.string().nullable(),
    tags: z.array(z.string()),
    latestStatus: emailStatus.nullable(),
    scheduledAt: timestamp.nullable(),
    domainId: intId.nullable(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'EmailListItem' });

export const emailEventSchema = z
  .strictObject({
    emailId: z.string(),
    status: emailStatus,
    createdAt: timestamp,
    data: z.record(z.string(), z.unknown()).nullable().meta({ description: 'Details of the event (SMTP reply, bounce, link), or null.' }),
  })
  .meta({ id: 'EmailEvent' });

/** Retrieve-one: replyTo, cc and bcc are absent rather than null (spec, Email). */
export const emailSchema = emailListItemSchema
  .extend({
    replyTo: addresses.optional(),
    cc: addresses.optional(),
    bcc: addresses.optional(),
    openTracking: z.boolean().nullable().meta({ description: "Open tracking chosen for this email at send time; null when the sending domain's openTracking decides." }),
    clickTracking: z.boolean().nullable().meta({ description: "Click tracking chosen for this email at send time; null when the sending domain's clickTracking decides." }),
    teamId: intId,
    emailEvents: z.array(emailEventSchema).meta({ description: 'Status events, oldest first.' }),
  })
  .meta({ id: 'Email' });

export const emailListSchema = z.strictObject({ data: z.array(emailListItemSchema), count });
