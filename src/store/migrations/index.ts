import type { Kysely, Migration } from 'kysely';

/**
 * A migration whose module is loaded when it runs: a store that is up to date (every admin
 * command, every start but the first after an upgrade) never loads the migrations' modules.
 */
const lazy = (load: () => Promise<{ up(db: Kysely<unknown>): Promise<void> }>): Migration => ({ up: async (db) => (await load()).up(db) });

// Every migration, keyed by its timestamped name. Kysely runs them in name order and
// records each in kysely_migration, so they are forward-only and run once.
export const MIGRATIONS: Record<string, Migration> = {
  '20261122010000-init': lazy(() => import('./20261122010000-init.js')),
  '20261122020000-domains': lazy(() => import('./20261122020000-domains.js')),
  '20261122030000-emails': lazy(() => import('./20261122030000-emails.js')),
  '20261122035000-templates': lazy(() => import('./20261122035000-templates.js')),
  '20261122040000-audience': lazy(() => import('./20261122040000-audience.js')),
  '20261122050000-webhooks-analytics': lazy(() => import('./20261122050000-webhooks-analytics.js')),
  '20261122060000-inbound': lazy(() => import('./20261122060000-inbound.js')),
  '20261122070000-campaigns': lazy(() => import('./20261122070000-campaigns.js')),
  '20261122080000-delivery-claim-index': lazy(() => import('./20261122080000-delivery-claim-index.js')),
  '20261122091500-campaign-hard-bounced': lazy(() => import('./20261122091500-campaign-hard-bounced.js')),
  '20261124010000-delivery-due-since': lazy(() => import('./20261124010000-delivery-due-since.js')),
  '20261126010000-console-users': lazy(() => import('./20261126010000-console-users.js')),
  '20261126020000-transport-security': lazy(() => import('./20261126020000-transport-security.js')),
  '20261126021000-domain-mta-sts': lazy(() => import('./20261126021000-domain-mta-sts.js')),
  '20261126030000-sandbox-messages': lazy(() => import('./20261126030000-sandbox-messages.js')),
  '20261126040000-operations': lazy(() => import('./20261126040000-operations.js')),
  '20261126050000-traffic-shaping': lazy(() => import('./20261126050000-traffic-shaping.js')),
  '20261126070000-audit-console-users': lazy(() => import('./20261126070000-audit-console-users.js')),
  '20261126080000-cluster': lazy(() => import('./20261126080000-cluster.js')),
  '20261126090000-login-failures': lazy(() => import('./20261126090000-login-failures.js')),
  '20261126160000-campaign-started-at': lazy(() => import('./20261126160000-campaign-started-at.js')),
  '20261126210000-inbound-dedupe': lazy(() => import('./20261126210000-inbound-dedupe.js')),
  '20261126240000-campaign-segment-filters': lazy(() => import('./20261126240000-campaign-segment-filters.js')),
  '20261127010000-domain-verifying-since': lazy(() => import('./20261127010000-domain-verifying-since.js')),
  '20261127020000-job-run-finished': lazy(() => import('./20261127020000-job-run-finished.js')),
  '20261127030000-campaign-domain': lazy(() => import('./20261127030000-campaign-domain.js')),
  '20261127040000-retention-kept': lazy(() => import('./20261127040000-retention-kept.js')),
  '20261127050000-domain-verified-at': lazy(() => import('./20261127050000-domain-verified-at.js')),
  '20261127060000-tracking-overrides': lazy(() => import('./20261127060000-tracking-overrides.js')),
  '20261127070000-submitted-by': lazy(() => import('./20261127070000-submitted-by.js')),
  '20261127080000-retention-indexes': lazy(() => import('./20261127080000-retention-indexes.js')),
  '20261128010000-bounce-notice-queue': lazy(() => import('./20261128010000-bounce-notice-queue.js')),
  '20261129010000-unpaired-surrogates': lazy(() => import('./20261129010000-unpaired-surrogates.js')),
  '20261129030000-idempotency-token': lazy(() => import('./20261129030000-idempotency-token.js')),
  '20261129050000-segment-email-keys': lazy(() => import('./20261129050000-segment-email-keys.js')),
  '20261129060000-address-keys': lazy(() => import('./20261129060000-address-keys.js')),
  '20261129070000-delivery-domain-keys': lazy(() => import('./20261129070000-delivery-domain-keys.js')),
  '20261129080000-merged-contact-properties': lazy(() => import('./20261129080000-merged-contact-properties.js')),
  '20261129090000-accepted-in-sandbox': lazy(() => import('./20261129090000-accepted-in-sandbox.js')),
  '20261129100000-campaign-accepted-in-sandbox': lazy(() => import('./20261129100000-campaign-accepted-in-sandbox.js')),
  '20261129150000-domains-name-index': lazy(() => import('./20261129150000-domains-name-index.js')),
  '20261129154500-suppression-unquoted-keys': lazy(() => import('./20261129154500-suppression-unquoted-keys.js')),
  '20261130000000-webhook-status': lazy(() => import('./20261130000000-webhook-status.js')),
  '20261130010000-contact-unquoted-keys': lazy(() => import('./20261130010000-contact-unquoted-keys.js')),
  '20261130020000-webhook-disabled-at': lazy(() => import('./20261130020000-webhook-disabled-at.js')),
  '20261130030000-orphan-domain-keys': lazy(() => import('./20261130030000-orphan-domain-keys.js')),
  '20261130040000-contact-book-deleting': lazy(() => import('./20261130040000-contact-book-deleting.js')),
  '20261130140000-machine-engagement': lazy(() => import('./20261130140000-machine-engagement.js')),
  '20261130170000-campaign-machine-counts': lazy(() => import('./20261130170000-campaign-machine-counts.js')),
  '20261130190000-contact-import-files': lazy(() => import('./20261130190000-contact-import-files.js')),
};
