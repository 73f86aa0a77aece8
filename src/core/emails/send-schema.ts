import { z } from 'zod';
import { MAX_CUSTOM_HEADER_NAME, MAX_CUSTOM_HEADER_VALUE } from './email-headers.js';
import { MAX_SCHEDULED_AT_CHARS } from './scheduled-at.js';

// The send body shared by POST /emails, each batch item, SMTP submission and the CLI
// (spec, Emails). Unknown fields are ignored rather than refused so SDKs that add fields
// keep working; every known field is checked.

// An empty list is the same as no list (SDKs send `cc: []` by default); an empty `to` is
// refused by the service with its own message. The union's message replaces zod's bare
// "Invalid input" for a list that is too long or holds a non-string.
const address = z.string().min(1).max(1000);
// A field left out is "is required" (plain-issues.ts), like any other; these words are for a wrong one.
const addressList = z.union([address, z.array(address).max(100)], { error: (issue) => (issue.input === undefined ? undefined : 'must be an address or a list of at most 100 addresses') });
const scalar = z.union([z.string(), z.number(), z.boolean()]).transform((v) => String(v));

export const MAX_ATTACHMENTS = 10;
export const MAX_TAGS = 10;
/** Far more than a template names; bounds what a send may make the renderer look through. */
export const MAX_SEND_VARIABLES = 1000;

export const sendBodySchema = z.object({
  to: addressList,
  from: z.string().min(1).max(1000),
  subject: z.string().min(1).max(998).optional(),
  templateId: z.string().min(1).max(100).optional(),
  variables: z
    .record(z.string().max(100), scalar)
    .refine((v) => Object.keys(v).length <= MAX_SEND_VARIABLES, `at most ${MAX_SEND_VARIABLES} variables`)
    .optional(),
  replyTo: addressList.nullable().optional(),
  cc: addressList.nullable().optional(),
  bcc: addressList.nullable().optional(),
  text: z.string().min(1).nullable().optional(),
  html: z.string().min(1).nullable().optional(),
  // zod's record leaves a "__proto__" key out (it could not be an ordinary key of the result):
  // refused here, rather than the header silently not sent.
  headers: z
    .preprocess((v, ctx) => {
      if (v !== null && typeof v === 'object' && Object.hasOwn(v, '__proto__')) ctx.addIssue({ code: 'custom', message: 'a header can not be named __proto__' });
      return v;
    }, z.record(z.string().min(1).max(MAX_CUSTOM_HEADER_NAME), z.string().min(1).max(MAX_CUSTOM_HEADER_VALUE)))
    .optional(),
  attachments: z
    .array(z.object({ filename: z.string().min(1).max(255), content: z.string().min(1) }))
    .max(MAX_ATTACHMENTS, `at most ${MAX_ATTACHMENTS} attachments`)
    .optional(),
  scheduledAt: z.string().min(1).max(MAX_SCHEDULED_AT_CHARS).nullable().optional(),
  tags: z.array(z.string().min(1).max(64)).max(MAX_TAGS, `at most ${MAX_TAGS} tags`).optional(),
  inReplyToId: z.string().min(1).max(100).nullable().optional(),
  // Over the sending domain's switches for this email only; absent or null, the domain decides
  // when the message is composed (a password reset's links are never rewritten with clickTracking: false).
  openTracking: z.boolean().nullable().optional(),
  clickTracking: z.boolean().nullable().optional(),
});

export type SendInput = z.infer<typeof sendBodySchema>;

export const batchBodySchema = z.array(sendBodySchema).min(1, 'a batch needs at least 1 email').max(100, 'a batch holds at most 100 emails');
