import type { Migration } from 'kysely';
import * as m20261122010000 from './20261122010000-init.js';
import * as m20261122020000 from './20261122020000-domains.js';
import * as m20261122030000 from './20261122030000-emails.js';
import * as m20261122035000 from './20261122035000-templates.js';
import * as m20261122040000 from './20261122040000-audience.js';
import * as m20261122050000 from './20261122050000-webhooks-analytics.js';
import * as m20261122060000 from './20261122060000-inbound.js';
import * as m20261122070000 from './20261122070000-campaigns.js';
import * as m20261122080000 from './20261122080000-delivery-claim-index.js';
import * as m20261122091500 from './20261122091500-campaign-hard-bounced.js';
import * as m20261124010000 from './20261124010000-delivery-due-since.js';
import * as m20261126010000 from './20261126010000-console-users.js';
import * as m20261126020000 from './20261126020000-transport-security.js';
import * as m20261126021000 from './20261126021000-domain-mta-sts.js';
import * as m20261126030000 from './20261126030000-sandbox-messages.js';
import * as m20261126040000 from './20261126040000-operations.js';
import * as m20261126050000 from './20261126050000-traffic-shaping.js';
import * as m20261126070000 from './20261126070000-audit-console-users.js';
import * as m20261126080000 from './20261126080000-cluster.js';
import * as m20261126090000 from './20261126090000-login-failures.js';
import * as m20261126160000 from './20261126160000-campaign-started-at.js';
import * as m20261126210000 from './20261126210000-inbound-dedupe.js';
import * as m20261126240000 from './20261126240000-campaign-segment-filters.js';
import * as m20261127010000 from './20261127010000-domain-verifying-since.js';
import * as m20261127020000 from './20261127020000-job-run-finished.js';
import * as m20261127030000 from './20261127030000-campaign-domain.js';
import * as m20261127040000 from './20261127040000-retention-kept.js';
import * as m20261127050000 from './20261127050000-domain-verified-at.js';
import * as m20261127060000 from './20261127060000-tracking-overrides.js';
import * as m20261127070000 from './20261127070000-submitted-by.js';
import * as m20261127080000 from './20261127080000-retention-indexes.js';
import * as m20261128010000 from './20261128010000-bounce-notice-queue.js';

// Every migration, keyed by its timestamped name. Kysely runs them in name order and
// records each in kysely_migration, so they are forward-only and run once.
export const MIGRATIONS: Record<string, Migration> = {
  '20261122010000-init': m20261122010000,
  '20261122020000-domains': m20261122020000,
  '20261122030000-emails': m20261122030000,
  '20261122035000-templates': m20261122035000,
  '20261122040000-audience': m20261122040000,
  '20261122050000-webhooks-analytics': m20261122050000,
  '20261122060000-inbound': m20261122060000,
  '20261122070000-campaigns': m20261122070000,
  '20261122080000-delivery-claim-index': m20261122080000,
  '20261122091500-campaign-hard-bounced': m20261122091500,
  '20261124010000-delivery-due-since': m20261124010000,
  '20261126010000-console-users': m20261126010000,
  '20261126020000-transport-security': m20261126020000,
  '20261126021000-domain-mta-sts': m20261126021000,
  '20261126030000-sandbox-messages': m20261126030000,
  '20261126040000-operations': m20261126040000,
  '20261126050000-traffic-shaping': m20261126050000,
  '20261126070000-audit-console-users': m20261126070000,
  '20261126080000-cluster': m20261126080000,
  '20261126090000-login-failures': m20261126090000,
  '20261126160000-campaign-started-at': m20261126160000,
  '20261126210000-inbound-dedupe': m20261126210000,
  '20261126240000-campaign-segment-filters': m20261126240000,
  '20261127010000-domain-verifying-since': m20261127010000,
  '20261127020000-job-run-finished': m20261127020000,
  '20261127030000-campaign-domain': m20261127030000,
  '20261127040000-retention-kept': m20261127040000,
  '20261127050000-domain-verified-at': m20261127050000,
  '20261127060000-tracking-overrides': m20261127060000,
  '20261127070000-submitted-by': m20261127070000,
  '20261127080000-retention-indexes': m20261127080000,
  '20261128010000-bounce-notice-queue': m20261128010000,
};
