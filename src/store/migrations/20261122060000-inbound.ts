import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Inbound mail: messages received for receiving domains, and every bounce/complaint report
// the inbound listener accepted (architecture.md, Outbound, inbound, tracking). Both are written before the SMTP 250.
export async function up(db: Kysely<unknown>): Promise<void> {
  // One row per (message, receiving domain): a transaction addressed to two receiving
  // domains is stored once for each, so each team sees only its own copy.
  await db.schema
    .createTable('received_emails')
    .addColumn('id', 'text', (c) => c.primaryKey()) // re_...
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('domain_id', 'integer', (c) => c.notNull().references('domains.id'))
    .addColumn('message_id', 'text') // Message-ID header; absent on some messages
    .addColumn('mail_from', 'text', (c) => c.notNull()) // envelope MAIL FROM; '' for the null sender
    .addColumn('rcpt_to_json', 'text', (c) => c.notNull()) // envelope recipients at this domain
    .addColumn('from_addr', 'text')
    .addColumn('to_json', 'text', (c) => c.notNull())
    .addColumn('cc_json', 'text', (c) => c.notNull())
    .addColumn('reply_to_json', 'text', (c) => c.notNull())
    .addColumn('subject', 'text')
    .addColumn('text_body', 'text')
    .addColumn('html_body', 'text')
    .addColumn('headers_json', 'text', (c) => c.notNull()) // [{name, value}] in message order
    .addColumn('in_reply_to', 'text')
    .addColumn('references_json', 'text')
    .addColumn('date_header', 'text')
    .addColumn('spf_result', 'text', (c) => c.notNull())
    .addColumn('dkim_result', 'text', (c) => c.notNull())
    .addColumn('dmarc_result', 'text', (c) => c.notNull())
    .addColumn('auth_json', 'text', (c) => c.notNull()) // per-check details and the Authentication-Results header
    .addColumn('remote_ip', 'text')
    .addColumn('helo', 'text')
    .addColumn('tls', 'integer', (c) => c.notNull())
    .addColumn('size_bytes', 'integer', (c) => c.notNull())
    .addColumn('attachment_count', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('received_emails_team_created').on('received_emails').columns(['team_id', 'created_at']).execute();
  await db.schema.createIndex('received_emails_domain_created').on('received_emails').columns(['domain_id', 'created_at']).execute();

  // The message as stored (our trace fields prepended), apart so list queries never page it in.
  await db.schema
    .createTable('received_email_raw')
    .addColumn('received_email_id', 'text', (c) => c.primaryKey().references('received_emails.id').onDelete('cascade'))
    .addColumn('raw', 'blob', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('received_attachments')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('received_email_id', 'text', (c) => c.notNull().references('received_emails.id').onDelete('cascade'))
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('filename', 'text')
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('content_id', 'text')
    .addColumn('disposition', 'text')
    .addColumn('size_bytes', 'integer', (c) => c.notNull())
    .addColumn('checksum', 'text', (c) => c.notNull()) // hex SHA-256 of the decoded content
    .addColumn('content', 'blob', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('received_attachments_email').on('received_attachments').columns(['received_email_id', 'position']).execute();

  // Every DSN / ARF / other message accepted at a return-path or complaint address, with what
  // it was understood as. Reports that could not be linked to an email stay here for operators.
  await db.schema
    .createTable('inbound_reports')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('kind', 'text', (c) => c.notNull()) // bounce | delay | complaint | feedback | notification | unparsed
    .addColumn('team_id', 'integer', (c) => c.references('teams.id').onDelete('cascade'))
    .addColumn('email_id', 'text')
    .addColumn('linked_by', 'text') // verp | report | header | message-id; null when unlinked
    .addColumn('mail_from', 'text', (c) => c.notNull())
    .addColumn('rcpt_to_json', 'text', (c) => c.notNull())
    .addColumn('remote_ip', 'text')
    .addColumn('summary_json', 'text', (c) => c.notNull())
    .addColumn('raw', 'blob', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('inbound_reports_email').on('inbound_reports').column('email_id').execute();
  await db.schema.createIndex('inbound_reports_created').on('inbound_reports').column('created_at').execute();

  // Some MTAs lowercase the whole return path; email ids are mixed-case base62, so the VERP
  // token is matched case-insensitively as a fallback (62^21 ids leave no room for collisions).
  await sql`create index emails_id_lower on emails(lower(id))`.execute(db);
}
