import type { Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Transport security (docs/outbound.md, MTA-STS, DANE and TLS reporting): the MTA-STS policies
// learnt from recipient domains, the daily TLS session counts per policy domain, the TLS-RPT
// reports made from them and their deliveries, and the TLS reports received for our own
// receiving domains.
export async function up(db: Kysely<unknown>): Promise<void> {
  // RFC 8461 §5.1: a policy is cached for its max_age, kept through fetch failures, and
  // replaced when the TXT id changes; kept here so a restart does not forget it.
  await db.schema
    .createTable('mta_sts_policies')
    .addColumn('domain', 'text', (c) => c.primaryKey())
    .addColumn('policy_id', 'text', (c) => c.notNull()) // the TXT record's id when it was fetched
    .addColumn('body', 'text', (c) => c.notNull()) // the policy file as served
    .addColumn('fetched_at', 'integer', (c) => c.notNull()) // epoch ms
    .addColumn('expires_at', 'integer', (c) => c.notNull()) // fetched_at + max_age
    .execute();

  // One row per (policy domain, UTC day, policy, result, failure details): the sessions to
  // report (RFC 8460 §4.4). Details are '' when absent so the key is unique.
  await db.schema
    .createTable('tls_session_counts')
    .addColumn('policy_domain', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull()) // YYYY-MM-DD, UTC
    .addColumn('policy_key', 'text', (c) => c.notNull()) // digest of type, strings and mx hosts
    .addColumn('policy_type', 'text', (c) => c.notNull())
    .addColumn('policy_json', 'text', (c) => c.notNull()) // {strings, mxHosts}
    .addColumn('result', 'text', (c) => c.notNull()) // 'success' or an RFC 8460 result type
    .addColumn('sending_ip', 'text', (c) => c.notNull())
    .addColumn('mx_host', 'text', (c) => c.notNull())
    .addColumn('receiving_ip', 'text', (c) => c.notNull())
    .addColumn('reason_code', 'text', (c) => c.notNull())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('tls_session_counts_pk', ['policy_domain', 'day', 'policy_key', 'result', 'sending_ip', 'mx_host', 'receiving_ip', 'reason_code'])
    .execute();
  await db.schema.createIndex('tls_session_counts_day').on('tls_session_counts').columns(['day', 'policy_domain']).execute();

  // One row per (policy domain, day) once it is reported (or found to want no report): the
  // primary key is what makes a report go out once, whatever restarts happen.
  await db.schema
    .createTable('tls_reports_out')
    .addColumn('policy_domain', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('report_id', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull()) // 'no-rua' | 'queued'
    .addColumn('rua_json', 'text', (c) => c.notNull())
    .addColumn('report_json', 'text') // the RFC 8460 report, the same bytes for every target and retry
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('tls_reports_out_pk', ['policy_domain', 'day'])
    .execute();

  await db.schema
    .createTable('tls_report_deliveries')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('policy_domain', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('target', 'text', (c) => c.notNull()) // a mailto: or https: URI from the rua
    .addColumn('state', 'text', (c) => c.notNull()) // 'pending' | 'sent' | 'failed'
    .addColumn('attempts', 'integer', (c) => c.notNull())
    .addColumn('next_attempt_at', 'integer', (c) => c.notNull()) // epoch ms
    .addColumn('lease_until', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addForeignKeyConstraint('tls_report_deliveries_report', ['policy_domain', 'day'], 'tls_reports_out', ['policy_domain', 'day'], (fk) => fk.onDelete('cascade'))
    .execute();
  await db.schema.createIndex('tls_report_deliveries_due').on('tls_report_deliveries').columns(['state', 'next_attempt_at']).execute();

  // TLS reports other senders sent about a receiving domain of ours (RFC 8460 §4).
  await db.schema
    .createTable('received_tls_reports')
    .addColumn('id', 'text', (c) => c.primaryKey()) // tlsr_...
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('domain_id', 'integer', (c) => c.notNull().references('domains.id'))
    .addColumn('organization_name', 'text', (c) => c.notNull())
    .addColumn('report_id', 'text', (c) => c.notNull())
    .addColumn('contact_info', 'text')
    .addColumn('start_datetime', 'text', (c) => c.notNull())
    .addColumn('end_datetime', 'text', (c) => c.notNull())
    .addColumn('total_successful', 'integer', (c) => c.notNull())
    .addColumn('total_failure', 'integer', (c) => c.notNull())
    .addColumn('policies_json', 'text', (c) => c.notNull())
    .addColumn('mail_from', 'text', (c) => c.notNull())
    .addColumn('remote_ip', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  // A reporter that sends one report twice (a retry after a lost 250) is stored once.
  await db.schema
    .createIndex('received_tls_reports_unique')
    .on('received_tls_reports')
    .columns(['domain_id', 'organization_name', 'report_id'])
    .unique()
    .execute();
  await db.schema.createIndex('received_tls_reports_team_created').on('received_tls_reports').columns(['team_id', 'created_at']).execute();
}
