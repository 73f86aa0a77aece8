import { z } from 'zod';

// Request bodies of the template endpoints, shared by the API and the console.

const name = z.string().trim().min(1).max(200);
const subject = z.string().min(1).max(998);
const content = z.string().max(2_000_000);
export const templateCreateSchema = z.object({ name, subject, content: content.optional() }).strict();
export const templatePatchSchema = z.object({ name: name.optional(), subject: subject.optional(), content: content.optional() }).strict();
export const templateRollbackSchema = z.object({ versionNumber: z.number().int().min(1) }).strict();
