import { z } from 'zod';
import { count, intId, stringMap, timestamp } from './common-schemas.js';

export const contactBookSchema = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    teamId: intId,
    properties: stringMap,
    variables: z.array(z.string()).meta({ description: 'Personalization variables allowed for contacts in the book.' }),
    emoji: z.string(),
    doubleOptInEnabled: z.boolean(),
    doubleOptInFrom: z.string().nullable(),
    doubleOptInSubject: z.string().nullable(),
    doubleOptInContent: z.string().nullable().meta({ description: 'Editor JSON of the confirmation email.' }),
    createdAt: timestamp,
    updatedAt: timestamp,
    _count: z.strictObject({ contacts: count }),
  })
  .meta({ id: 'ContactBook' });

export const contactSchema = z
  .strictObject({
    id: z.string(),
    email: z.string(),
    firstName: z.string().nullable(),
    lastName: z.string().nullable(),
    subscribed: z.boolean(),
    unsubscribeReason: z
      .enum(['UNSUBSCRIBED', 'BOUNCED', 'COMPLAINED'])
      .nullable()
      .meta({ description: 'Why the contact is unsubscribed; null while subscribed or while a double opt-in confirmation is pending.' }),
    properties: stringMap,
    contactBookId: z.string(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Contact' });

export const contactIdSchema = z.strictObject({ contactId: z.string() });
export const contactDeletedSchema = z.strictObject({ success: z.boolean() });

export const contactBulkAddSchema = z.strictObject({
  message: z.string(),
  count: count.meta({ description: 'Valid rows, each now in the book.' }),
  created: count,
  updated: count,
  errors: z
    .array(z.strictObject({ index: z.int().min(0), email: z.string().nullable(), message: z.string() }))
    .meta({ description: 'Rows refused, by their index in the request; they changed nothing.' }),
});
