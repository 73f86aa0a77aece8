import { z } from 'zod';
import { MAX_BATCH_SIZE } from './campaign-service.js';

// Request bodies of the campaign endpoints, shared by the API and the console.

const addresses = z.union([z.string().min(1).max(1000), z.array(z.string().min(1).max(1000)).max(50)]).nullable();
const batchSize = z.number().int().min(1).max(MAX_BATCH_SIZE);
const fields = {
  name: z.string().trim().min(1).max(200),
  from: z.string().min(1).max(1000),
  subject: z.string().min(1).max(998),
  contactBookId: z.string().min(1).max(100),
  segmentId: z.string().min(1).max(100).nullable(),
  previewText: z.string().max(500).nullable(),
  content: z.string().min(1).max(2_000_000).nullable(),
  html: z.string().min(1).max(2_000_000).nullable(),
  replyTo: addresses,
  cc: addresses,
  bcc: addresses,
  batchSize,
  // Over the domain's switches for every email of the campaign; null, the domain decides.
  openTracking: z.boolean().nullable(),
  clickTracking: z.boolean().nullable(),
};
export const campaignCreateSchema = z
  .object({
    ...fields,
    segmentId: fields.segmentId.optional(),
    previewText: fields.previewText.optional(),
    content: fields.content.optional(),
    html: fields.html.optional(),
    replyTo: addresses.optional(),
    cc: addresses.optional(),
    bcc: addresses.optional(),
    batchSize: batchSize.optional(),
    openTracking: fields.openTracking.optional(),
    clickTracking: fields.clickTracking.optional(),
    sendNow: z.boolean().optional(),
    scheduledAt: z.string().min(1).max(200).nullable().optional(),
  })
  .strict();
export const campaignPatchSchema = z.object(fields).partial().strict();
export const campaignScheduleSchema = z.object({ scheduledAt: z.string().min(1).max(200).nullable().optional(), batchSize: batchSize.optional() }).strict();
