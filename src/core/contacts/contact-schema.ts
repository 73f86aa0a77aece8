import { z } from 'zod';
import { PROPERTY_KEY_PATTERN } from '../../store/repositories/contact-filter-sql.js';
import { badRequest } from '../errors.js';
import { isValidAddress, mailboxKey } from '../emails/addresses.js';

// Request bodies of the contact endpoints (spec, Contacts). Unknown fields are refused rather
// than dropped: a typo such as "firstname" would otherwise lose data silently.

export const MAX_PROPERTIES = 100;
export const MAX_PROPERTY_VALUE = 2000;
export const MAX_NAME = 256;
/** RFC 5321 4.5.3.1: a path is at most 256 octets, so an address is at most 254. */
const MAX_EMAIL_INPUT = 320;

/** Property values are strings; numbers and booleans from loosely typed clients are kept as text. */
const propertyValue = z.union([z.string().max(MAX_PROPERTY_VALUE), z.number(), z.boolean()]).transform((v) => String(v));

export const contactProperties = z
  .record(z.string().regex(PROPERTY_KEY_PATTERN, 'property names are 1-64 characters of A-Z, a-z, 0-9, _ and -'), propertyValue)
  .refine((p) => Object.keys(p).length <= MAX_PROPERTIES, `at most ${MAX_PROPERTIES} properties`);

const personName = z.string().max(MAX_NAME).nullable().optional();

export const contactCreateSchema = z
  .object({
    email: z.string().min(1).max(MAX_EMAIL_INPUT),
    firstName: personName,
    lastName: personName,
    properties: contactProperties.optional(),
    subscribed: z.boolean().optional(),
  })
  .strict();

export const contactPatchSchema = z
  .object({
    firstName: personName,
    lastName: personName,
    properties: contactProperties.optional(),
    subscribed: z.boolean().optional(),
  })
  .strict();

export type ContactCreateInput = z.infer<typeof contactCreateSchema>;
export type ContactPatchInput = z.infer<typeof contactPatchSchema>;

/** The key contacts are matched on (mailboxKey: trimmed, lowercased, needless quotes dropped); 400 naming the field when invalid. */
export function normalizeContactEmail(raw: string, field = 'email'): string {
  const email = mailboxKey(raw);
  if (!isValidAddress(email)) throw badRequest(`${field}: "${raw}" is not a valid email address`);
  return email;
}
