import type { Generated } from 'kysely';
import type { DeliveryAttemptsTable, OperatorAuditTable, OperatorKeysTable, QueueSuspensionsTable } from './operations-tables.js';
import type {
  CampaignBatchLeaseColumns,
  ClusterNodesTable,
  ConnectionLeasesTable,
  ContactImportOwnerColumns,
  IdempotencyOwnerColumns,
  JobRunsTable,
  RateLimitWindowsTable,
  ShapingRatesTable,
} from './cluster-tables.js';
import type { ShapingHoldsTable, WarmupUsageTable } from './shaping-tables.js';
import type { BounceNoticeRecipientsTable, ReceivedEmailsTable, ReceivedEmailRawTable, SandboxMessagesTable, SandboxMessageRawTable, ReceivedAttachmentsTable, InboundReportsTable } from './inbound-tables.js';
import type { MtaStsMode, MtaStsPoliciesTable, ReceivedTlsReportsTable, TlsReportDeliveriesTable, TlsReportsOutTable, TlsSessionCountsTable } from './transport-security-tables.js';

export type { BounceNoticeRecipientsTable, ReceivedEmailsTable, ReceivedEmailRawTable, SandboxMessagesTable, SandboxMessageRawTable, ReceivedAttachmentsTable, InboundReportKind, InboundReportsTable } from './inbound-tables.js';
export type { MtaStsMode, MtaStsPoliciesTable, ReceivedTlsReportsTable, TlsReportDeliveriesTable, TlsReportsOutTable, TlsSessionCountsTable } from './transport-security-tables.js';

// Row shapes of every table. Timestamps are ISO-8601 UTC strings (they sort as text);
// due times used by claim queries are integer epoch milliseconds.

export interface TeamsTable {
  id: Generated<number>;
  name: string;
  /** Per-team override of the API requests-per-second limit; null = config default. */
  rate_limit: number | null;
  /** Egress pool of the team's mail (outbound.pools); null = the default pool. */
  pool: string | null;
  created_at: string;
  updated_at: string;
}

export interface ApiKeysTable {
  id: Generated<number>;
  team_id: number;
  name: string;
  /** The public part of `ph_<public id>_<secret>`, used to find the row. */
  public_id: string;
  /** SHA-256 hex of the secret part (architecture.md, Decisions: API keys). */
  secret_hash: string;
  /** First and last characters of the full key, so users can tell keys apart. */
  partial_key: string;
  permission: 'FULL' | 'SENDING';
  domain_id: number | null;
  last_used_at: string | null;
  created_at: string;
}

export interface SettingsTable {
  key: string;
  value: string;
}

/** Emails past the content retention age that had to keep their content at the last run (core/retention). */
export interface RetentionKeptTable {
  email_id: string;
}

export type DomainStatus = 'NOT_STARTED' | 'PENDING' | 'SUCCESS' | 'FAILED' | 'TEMPORARY_FAILURE';

export interface DomainsTable {
  id: Generated<number>;
  team_id: number;
  name: string;
  /** Egress pool of this domain's mail, over the team's; null = the team's. */
  pool: string | null;
  region: string;
  status: DomainStatus;
  subdomain: string | null;
  dkim_selector: string;
  /** PKCS#8 PEM; never leaves the store except to the signer. */
  dkim_private_key: string;
  /** Base64 SubjectPublicKeyInfo: the p= value of the DKIM record. */
  public_key: string;
  bounce_label: string;
  dkim_status: DomainStatus | null;
  spf_status: DomainStatus | null;
  mx_status: DomainStatus | null;
  dmarc_status: DomainStatus | null;
  dmarc_added: number;
  click_tracking: number;
  open_tracking: number;
  tracking_domain: string | null;
  tracking_domain_status: DomainStatus | null;
  tls_policy: 'OPPORTUNISTIC' | 'ENFORCED';
  receiving: number;
  receiving_mx_status: DomainStatus | null;
  /** The MTA-STS mode Posthorn serves for the domain when receiving (RFC 8461). */
  mta_sts_mode: Generated<MtaStsMode>;
  /** _mta-sts TXT, the mta-sts host and the _smtp._tls TXT, as last checked (recommended records). */
  mta_sts_status: DomainStatus | null;
  mta_sts_host_status: DomainStatus | null;
  tls_rpt_status: DomainStatus | null;
  is_verifying: number;
  /** When the check under way began (ISO); read with is_verifying. */
  verifying_since: string | null;
  error_message: string | null;
  verification_error: string | null;
  last_checked_at: string | null;
  /** When a check last found the domain verified (ISO); null: never, or unknown (before this column). */
  verified_at: string | null;
  unverified_since: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface EmailsTable {
  id: string;
  team_id: number;
  domain_id: number | null;
  api_key_id: number | null;
  from_addr: string;
  to_json: string;
  cc_json: string | null;
  bcc_json: string | null;
  reply_to_json: string | null;
  subject: string;
  text_body: string | null;
  html_body: string | null;
  headers_json: string | null;
  attachments_json: string | null;
  tags_json: string;
  template_id: string | null;
  campaign_id: string | null;
  contact_id: string | null;
  in_reply_to: string | null;
  references_json: string | null;
  message_id: string;
  scheduled_at: string | null;
  /** Tracking chosen for this email: 1 on, 0 off, null the domain's switch when it is composed. */
  open_tracking: number | null;
  click_tracking: number | null;
  /** The envelope sender (MAIL FROM) of mail submitted by SMTP ('' for <>); null for every other send. */
  submitted_by: string | null;
  /** 1 when a process in sandbox mode accepted it, 0 when one without; null before this was kept (captured in sandbox mode). */
  accepted_in_sandbox: number | null;
  latest_status: string;
  status_rank: number;
  sent_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface EmailTagsTable {
  email_id: string;
  team_id: number;
  tag: string;
}

export interface EmailEventsTable {
  id: Generated<number>;
  email_id: string;
  status: string;
  data_json: string | null;
  created_at: string;
}

export type DeliveryState = 'queued' | 'delivered' | 'bounced' | 'failed' | 'cancelled' | 'suppressed';

export interface DeliveriesTable {
  id: Generated<number>;
  email_id: string;
  team_id: number;
  recipient: string;
  rcpt_domain: string;
  kind: 'to' | 'cc' | 'bcc';
  state: DeliveryState;
  attempts: number;
  next_attempt_at: number;
  lease_owner: string | null;
  lease_until: number | null;
  last_code: number | null;
  last_response: string | null;
  mx_host: string | null;
  /** Epoch ms the give-up age counts from: acceptance, or the scheduled time if later. */
  due_since: number;
  /** Why traffic shaping put it back unattempted (a hold, the rate, the warm-up budget); null after an attempt. */
  held_reason: string | null;
  updated_at: string;
}

export interface IdempotencyKeysTable {
  team_id: number;
  key: string;
  body_hash: string;
  state: 'in_flight' | 'done';
  response_json: string | null;
  created_at: number;
}

export interface SuppressionsTable {
  id: Generated<number>;
  team_id: number;
  email: string;
  reason: 'HARD_BOUNCE' | 'COMPLAINT' | 'MANUAL';
  source: string | null;
  created_at: string;
}

export interface TemplatesTable {
  id: string;
  team_id: number;
  name: string;
  subject: string;
  content: string;
  html: string;
  text_body: string;
  published_version: number | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface TemplateVersionsTable {
  template_id: string;
  version_number: number;
  subject: string;
  content: string;
  html: string;
  text_body: string;
  created_at: string;
}

export interface ContactBooksTable {
  id: string;
  team_id: number;
  name: string;
  emoji: string;
  /** JSON object of string to string. */
  properties_json: string;
  /** JSON array of variable names. */
  variables_json: string;
  double_opt_in_enabled: number;
  double_opt_in_from: string | null;
  double_opt_in_subject: string | null;
  /** Editor document JSON; null = the default confirmation email. */
  double_opt_in_content: string | null;
  created_at: string;
  updated_at: string;
  /** When its delete began (contacts go in batches first); null otherwise. Nothing new is scheduled on it meanwhile. */
  deleting_since: string | null;
}

export interface ContactsTable {
  id: string;
  team_id: number;
  contact_book_id: string;
  /** The mailboxKey: trimmed, lowercased, the domain in A-labels, needless quotes dropped. */
  email: string;
  first_name: string | null;
  last_name: string | null;
  subscribed: number;
  /** Why the contact is unsubscribed; null with subscribed = 0 means double opt-in pending. */
  unsubscribe_reason: string | null;
  /** JSON object of string to string. */
  properties_json: string;
  created_at: string;
  updated_at: string;
}

/**
 * The id of a contact merged into another (migrations 20261129060000-address-keys and
 * 20261130010000-contact-unquoted-keys): links in mail already sent name it, and lead to the
 * contact it was merged into.
 */
export interface ContactAliasesTable {
  id: string;
  contact_id: string;
}

export interface SegmentsTable {
  id: string;
  team_id: number;
  contact_book_id: string;
  name: string;
  filters_json: string;
  created_at: string;
  updated_at: string;
}

export interface WebhooksTable {
  id: string;
  team_id: number;
  url: string;
  description: string | null;
  event_types_json: string;
  /** JSON array of domain ids; null means every domain. */
  domain_ids_json: string | null;
  secret: string;
  /** Only an active endpoint is matched to new events and has its pending calls sent (a test event excepted). */
  status: Generated<WebhookStatus>;
  /** Final failures (every attempt of an event failed) in a row while active; a delivery resets it. */
  consecutive_failures: Generated<number>;
  /** When it was paused or auto-disabled (ISO); null while active. */
  disabled_at: Generated<string | null>;
  created_at: string;
  updated_at: string;
}

export type WebhookStatus = 'active' | 'paused' | 'auto_disabled';

export interface WebhookEventsTable {
  id: string;
  team_id: number;
  type: string;
  domain_id: number | null;
  /** The exact JSON body POSTed on every attempt. */
  body: string;
  created_at: string;
}

/** discarded: never sent, its endpoint was paused or auto-disabled while it waited. */
export type WebhookCallState = 'pending' | 'delivered' | 'failed' | 'discarded';

export interface WebhookCallsTable {
  id: Generated<number>;
  webhook_id: string;
  event_id: string;
  state: WebhookCallState;
  attempts: number;
  next_attempt_at: number;
  lease_owner: string | null;
  lease_until: number | null;
  created_at: string;
  updated_at: string;
}

export interface WebhookAttemptsTable {
  id: Generated<number>;
  public_id: string;
  call_id: number;
  webhook_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  url: string;
  request_headers_json: string;
  response_status: number | null;
  response_body: string | null;
  duration_ms: number;
  error: string | null;
  succeeded: number;
  /** 1: no HTTP attempt, the call was discarded (its endpoint stopped); `attempt` is the one not made. */
  discarded: Generated<number>;
  next_attempt_at: number | null;
  created_at: string;
}

export interface EmailDailyStatsTable {
  team_id: number;
  /** 0 when the event carried no domain. */
  domain_id: number;
  /** YYYY-MM-DD (UTC). */
  day: string;
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  bounced: number;
  hard_bounced: number;
  complained: number;
  /** Emails first opened or clicked by a machine (a privacy proxy or link scanner) that day. */
  machine_opened: number;
  machine_clicked: number;
}

export interface EmailEngagementCountedTable {
  email_id: string;
  kind: 'opened' | 'clicked';
}

export type CampaignStatus = 'DRAFT' | 'SCHEDULED' | 'RUNNING' | 'PAUSED' | 'SENT';

export interface CampaignsTable {
  id: string;
  team_id: number;
  name: string;
  from_addr: string;
  /** The team's domain the from-address is on (null: its domain was deleted before this was kept). */
  domain_id: number | null;
  subject: string;
  preview_text: string | null;
  contact_book_id: string;
  segment_id: string | null;
  content: string | null;
  html: string | null;
  text_body: string | null;
  reply_to_json: string;
  cc_json: string;
  bcc_json: string;
  status: CampaignStatus;
  scheduled_at: string | null;
  /** When it began sending: its audience is the contacts created by then (null: started before this was kept). */
  started_at: string | null;
  /** The segment's filter as of the start (null: no segment, or started before this was kept). */
  segment_filters_json: string | null;
  batch_size: number;
  /** Tracking of the campaign's emails: 1 on, 0 off, null the domain's switch (as an email's). */
  open_tracking: number | null;
  click_tracking: number | null;
  /** 1 when scheduled, started or last resumed in sandbox mode, 0 when not: its emails are accepted as that; null before this was kept (the running process's mode). */
  accepted_in_sandbox: number | null;
  cursor: string | null;
  next_batch_at: number | null;
  total: number;
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  bounced: number;
  /** Permanent bounces only (also counted in bounced). */
  hard_bounced: number;
  complained: number;
  unsubscribed: number;
  /** Emails opened or clicked by a machine (a privacy proxy or link scanner); opened and clicked count people only. */
  machine_opened: number;
  machine_clicked: number;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface CampaignRecipientsTable {
  campaign_id: string;
  contact_id: string;
  email_id: string;
  counted: string;
  unsubscribed: number;
}

/** A person who signs in to the web console (docs/console.md). */
export interface ConsoleUsersTable {
  id: Generated<number>;
  team_id: number;
  /** Lowercased; one user per address across the whole server. */
  email: string;
  /** scrypt, self-describing: `scrypt$<log2 N>$<r>$<p>$<salt b64>$<hash b64>`. */
  password_hash: string;
  /** 1: also sees the operator pages (teams, queue). */
  operator: number;
  last_login_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface ConsoleSessionsTable {
  /** SHA-256 hex of the cookie's token: the token itself is never stored. */
  token_hash: string;
  user_id: number;
  /** The session's CSRF token, sent back in every form and checked on every change. */
  csrf_token: string;
  created_at_ms: number;
  last_seen_ms: number;
}

/** One failed console sign-in, counted against one key (migration 20261126090000-login-failures). */
export interface LoginFailuresTable {
  id: Generated<number>;
  /** `a:` (the account) or `i:` (the client address), then the SHA-256 of the value (base64url). */
  key: string;
  /** epoch ms of the attempt */
  at_ms: number;
}

export type ContactImportStatus = 'RUNNING' | 'DONE' | 'FAILED';

export interface ContactImportsTable {
  id: string;
  team_id: number;
  contact_book_id: string;
  file_name: string;
  status: ContactImportStatus;
  total_rows: number;
  processed_rows: number;
  created_count: number;
  updated_count: number;
  error_count: number;
  /** [{line, email, message}], the first few hundred refused rows. */
  errors_json: string;
  failure: string | null;
  created_at: string;
  updated_at: string;
}

/** A running import's uploaded file, apart from its progress row (rewritten at every chunk); deleted when the import ends. */
export interface ContactImportFilesTable {
  import_id: string;
  team_id: number;
  content: string;
}

export interface Database {
  cluster_nodes: ClusterNodesTable;
  job_runs: JobRunsTable;
  rate_limit_windows: RateLimitWindowsTable;
  connection_leases: ConnectionLeasesTable;
  console_users: ConsoleUsersTable;
  console_sessions: ConsoleSessionsTable;
  login_failures: LoginFailuresTable;
  contact_imports: ContactImportsTable & ContactImportOwnerColumns;
  contact_import_files: ContactImportFilesTable;
  operator_keys: OperatorKeysTable;
  operator_audit: OperatorAuditTable;
  queue_suspensions: QueueSuspensionsTable;
  shaping_holds: ShapingHoldsTable;
  warmup_usage: WarmupUsageTable;
  shaping_rates: ShapingRatesTable;
  delivery_attempts: DeliveryAttemptsTable;
  mta_sts_policies: MtaStsPoliciesTable;
  tls_session_counts: TlsSessionCountsTable;
  tls_reports_out: TlsReportsOutTable;
  tls_report_deliveries: TlsReportDeliveriesTable;
  received_tls_reports: ReceivedTlsReportsTable;
  campaigns: CampaignsTable & CampaignBatchLeaseColumns;
  campaign_recipients: CampaignRecipientsTable;
  contact_aliases: ContactAliasesTable;
  webhooks: WebhooksTable;
  webhook_events: WebhookEventsTable;
  webhook_calls: WebhookCallsTable;
  webhook_attempts: WebhookAttemptsTable;
  email_daily_stats: EmailDailyStatsTable;
  email_engagement_counted: EmailEngagementCountedTable;
  received_emails: ReceivedEmailsTable;
  received_email_raw: ReceivedEmailRawTable;
  sandbox_messages: SandboxMessagesTable;
  sandbox_message_raw: SandboxMessageRawTable;
  received_attachments: ReceivedAttachmentsTable;
  inbound_reports: InboundReportsTable;
  contact_books: ContactBooksTable;
  contacts: ContactsTable;
  segments: SegmentsTable;
  templates: TemplatesTable;
  template_versions: TemplateVersionsTable;
  emails: EmailsTable;
  email_tags: EmailTagsTable;
  email_events: EmailEventsTable;
  deliveries: DeliveriesTable;
  idempotency_keys: IdempotencyKeysTable & IdempotencyOwnerColumns;
  suppressions: SuppressionsTable;
  domains: DomainsTable;
  teams: TeamsTable;
  api_keys: ApiKeysTable;
  settings: SettingsTable;
  retention_kept: RetentionKeptTable;
  bounce_notice_recipients: BounceNoticeRecipientsTable;
}
