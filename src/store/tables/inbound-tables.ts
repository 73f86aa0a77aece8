import type { Generated } from 'kysely';

// Row shapes of the inbound side: received mail and its parts, sandbox captures, the reports
// (bounces, complaints) inbound mail brings, and the bounce notices owed to submitting apps.

/** A recipient of a submitted email waiting for its bounce notice (core/emails/bounce-notice-service.ts). */
export interface BounceNoticeRecipientsTable {
  id: Generated<number>;
  email_id: string;
  team_id: number;
  recipient: string;
  reply: string | null;
  smtp_code: number | null;
  mx_host: string | null;
  reason: string;
  status: string | null;
  /** 1: given up on at the give-up age. */
  expired: number;
  /** Epoch ms: when the recipient ended. */
  created_at: number;
  next_attempt_at: number;
  attempts: number;
  first_failure_at: number | null;
  lease_owner: string | null;
  lease_until: number | null;
}

/** A message received for a receiving domain (one row per message and domain). */
export interface ReceivedEmailsTable {
  id: string;
  team_id: number;
  domain_id: number;
  message_id: string | null;
  /** Envelope MAIL FROM; '' for the null sender. */
  mail_from: string;
  rcpt_to_json: string;
  from_addr: string | null;
  to_json: string;
  cc_json: string;
  reply_to_json: string;
  subject: string | null;
  text_body: string | null;
  html_body: string | null;
  /** JSON [{name, value}] in message order, values unfolded but not decoded. */
  headers_json: string;
  in_reply_to: string | null;
  references_json: string | null;
  date_header: string | null;
  spf_result: string;
  dkim_result: string;
  dmarc_result: string;
  auth_json: string;
  remote_ip: string | null;
  helo: string | null;
  tls: number;
  size_bytes: number;
  attachment_count: number;
  created_at: string;
  /** SHA-256 of the SMTP transaction for this domain (core/received/transaction-key.ts): a retried message is stored once. */
  dedupe_key: string | null;
}

export interface ReceivedEmailRawTable {
  received_email_id: string;
  raw: Buffer;
}

/** Sandbox mode's capture mailbox: one row per transaction the engine would have sent to an MX. */
export interface SandboxMessagesTable {
  id: string;
  team_id: number;
  domain_id: number;
  email_id: string;
  /** Envelope MAIL FROM: the VERP return path. */
  mail_from: string;
  rcpt_to_json: string;
  subject: string | null;
  size_bytes: number;
  /** The parsed parts (sandbox-service.ts, SandboxParsedMessage) as JSON. */
  parsed_json: string;
  created_at: string;
}

export interface SandboxMessageRawTable {
  sandbox_message_id: string;
  raw: Buffer;
}

export interface ReceivedAttachmentsTable {
  id: Generated<number>;
  received_email_id: string;
  position: number;
  filename: string | null;
  content_type: string;
  content_id: string | null;
  disposition: string | null;
  size_bytes: number;
  checksum: string;
  content: Buffer;
}

export type InboundReportKind = 'bounce' | 'delay' | 'complaint' | 'feedback' | 'notification' | 'unparsed';

/** A DSN, ARF or other message accepted at a return-path or complaint address. */
export interface InboundReportsTable {
  id: Generated<number>;
  kind: InboundReportKind;
  team_id: number | null;
  email_id: string | null;
  linked_by: string | null;
  mail_from: string;
  rcpt_to_json: string;
  remote_ip: string | null;
  summary_json: string;
  raw: Buffer;
  created_at: string;
  /** SHA-256 of the SMTP transaction (core/received/transaction-key.ts): a retried report is recorded once per team. */
  dedupe_key: string | null;
}
