import { z } from 'zod';
import { timestamp } from './common-schemas.js';

const versionNumber = z.int().min(1);

export const templateSchema = z
  .strictObject({
    id: z.string(),
    name: z.string(),
    subject: z.string(),
    content: z.string().meta({ description: 'The draft: an editor document as a JSON string.' }),
    html: z.string().meta({ description: 'The draft rendered to HTML (never set directly).' }),
    publishedVersion: versionNumber.nullable().meta({ description: 'The version sends use; null until published.' }),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Template' });

export const templateVersionSchema = z
  .strictObject({
    versionNumber,
    subject: z.string(),
    content: z.string(),
    html: z.string(),
    createdAt: timestamp,
    isPublished: z.boolean().meta({ description: 'Whether sends use this version.' }),
  })
  .meta({ id: 'TemplateVersion' });

export const templateVersionsSchema = z.strictObject({ publishedVersion: versionNumber.nullable(), versions: z.array(templateVersionSchema) });
