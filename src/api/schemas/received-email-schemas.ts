import { z } from 'zod';
import { count, intId, timestamp } from './common-schemas.js';

const check = z.strictObject({ result: z.string(), domain: z.string().nullable() });

export const receivedEmailListItemSchema = z
  .strictObject({
    id: z.string(),
    domainId: intId,
    messageId: z.string().nullable(),
    from: z.string().nullable(),
    to: z.array(z.string()),
    cc: z.array(z.string()),
    replyTo: z.array(z.string()),
    subject: z.string().nullable(),
    envelope: z.strictObject({ mailFrom: z.string().meta({ description: 'Empty for the null sender.' }), rcptTo: z.array(z.string()) }),
    authResults: z.strictObject({
      spf: check,
      dkim: z.strictObject({
        result: z.string(),
        signatures: z.array(z.strictObject({ result: z.string(), domain: z.string().nullable(), selector: z.string().nullable(), aligned: z.boolean() })),
      }),
      dmarc: check.extend({ policy: z.string().nullable() }),
    }),
    attachmentCount: count,
    sizeBytes: count,
    createdAt: timestamp,
  })
  .meta({ id: 'ReceivedEmailListItem' });

export const receivedEmailSchema = receivedEmailListItemSchema
  .extend({
    teamId: intId,
    text: z.string().nullable(),
    html: z.string().nullable(),
    headers: z.array(z.strictObject({ name: z.string(), value: z.string() })).meta({ description: 'In message order, unfolded but not decoded.' }),
    inReplyTo: z.string().nullable(),
    references: z.array(z.string()),
    date: z.string().nullable().meta({ description: 'The Date header as sent.' }),
    authenticationResults: z.string().meta({ description: 'The Authentication-Results header we prepended.' }),
    remote: z.strictObject({ ip: z.string().nullable(), helo: z.string().nullable(), tls: z.boolean() }),
    attachments: z.array(
      z.strictObject({
        filename: z.string().nullable(),
        contentType: z.string(),
        contentId: z.string().nullable(),
        disposition: z.string().nullable(),
        size: count,
        sha256: z.string(),
        content: z.string().meta({ description: 'Base64.' }),
      }),
    ),
  })
  .meta({ id: 'ReceivedEmail' });

/** The stored message (message/rfc822), returned as bytes. */
export const rawMessageSchema = z.instanceof(Buffer).meta({ type: 'string', description: 'The message as stored, with our trace fields on top.' });
