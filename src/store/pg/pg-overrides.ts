import type { DialectOverride } from '../store-context.js';
import { pgAnalytics } from './pg-analytics.js';
import { pgAudit } from './pg-audit.js';
import { pgBounceNotices } from './pg-bounce-notices.js';
import { pgCampaigns } from './pg-campaigns.js';
import { pgContactImports } from './pg-contact-imports.js';
import { pgDeliveries } from './pg-deliveries.js';
import { pgEmails } from './pg-emails.js';
import { pgQueue } from './pg-queue.js';
import { pgApiKeys, pgSuppressions } from './pg-reads.js';
import { pgShaping } from './pg-shaping.js';
import { pgWebhooks } from './pg-webhooks.js';

/** The repositories whose SQLite hot paths PostgreSQL implements its own way (store-context.ts, withDialect). */
export const PG_OVERRIDES: Record<string, DialectOverride> = {
  analytics: pgAnalytics,
  apiKeys: pgApiKeys,
  bounceNotices: pgBounceNotices,
  campaigns: pgCampaigns,
  contactImports: pgContactImports,
  deliveries: pgDeliveries,
  emails: pgEmails,
  operatorAudit: pgAudit,
  queue: pgQueue,
  shaping: pgShaping,
  suppressions: pgSuppressions,
  webhooks: pgWebhooks,
};
