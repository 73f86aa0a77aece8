import { z } from 'zod';
import { intId, timestamp } from './common-schemas.js';

export const apiKeySchema = z
  .strictObject({
    id: intId,
    name: z.string(),
    permission: z.enum(['FULL', 'SENDING']),
    domainId: intId.nullable().meta({ description: 'The one domain this key may send from and see; null for all.' }),
    partialKey: z.string().meta({ description: 'The start and end of the key, for recognising it.' }),
    lastUsed: timestamp.nullable(),
    createdAt: timestamp,
  })
  .meta({ id: 'ApiKey' });

export const createdApiKeySchema = apiKeySchema
  .extend({ token: z.string().meta({ description: 'The full key: shown only in this response.' }) })
  .meta({ id: 'CreatedApiKey' });
