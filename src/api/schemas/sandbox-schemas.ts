import { z } from 'zod';
import { count, intId, timestamp } from './common-schemas.js';

const envelope = z.strictObject({
  mailFrom: z.string().meta({ description: 'The envelope sender: the VERP return path bounces+<emailId>_<tag>@<bounce host>.' }),
  rcptTo: z.array(z.string()).meta({ description: 'The envelope recipients of this transaction (one message per email and recipient domain).' }),
});

export const sandboxMessageListItemSchema = z
  .strictObject({
    id: z.string(),
    emailId: z.string().meta({ description: 'The email this message carries (GET /v1/emails/{emailId}).' }),
    envelope,
    subject: z.string().nullable(),
    receivedAt: timestamp,
  })
  .meta({ id: 'SandboxMessageListItem' });

export const sandboxMessageSchema = sandboxMessageListItemSchema
  .extend({
    domainId: intId,
    sizeBytes: count,
    raw: z.string().meta({ description: 'The message exactly as it would have gone to the MX: composed, tracked and DKIM-signed.' }),
    parsed: z.strictObject({
      from: z.string().nullable(),
      to: z.array(z.string()),
      cc: z.array(z.string()),
      replyTo: z.array(z.string()),
      subject: z.string().nullable(),
      messageId: z.string().nullable(),
      date: timestamp.nullable(),
      headers: z.array(z.strictObject({ name: z.string(), value: z.string() })).meta({ description: 'In message order, unfolded but not decoded (DKIM-Signature included).' }),
      text: z.string().nullable(),
      html: z.string().nullable(),
      attachments: z.array(z.strictObject({ filename: z.string().nullable(), contentType: z.string(), size: count })).meta({ description: 'Their bytes are in raw.' }),
    }),
  })
  .meta({ id: 'SandboxMessage' });
