import { createHash } from 'node:crypto';
import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { DomainRecord } from '../../store/repositories/domains-repository.js';
import type { NewReceivedEmail, ReceivedEmailRow, ReceivedEmailsRepository } from '../../store/repositories/received-emails-repository.js';
import { badRequest, notFound } from '../errors.js';
import type { BusEvent, EventBus } from '../events.js';
import type { AuthResults, ReceivedMessageInput } from './inbound-types.js';
import { transactionKey } from './transaction-key.js';
import { orTooSlow } from '../query-too-slow.js';

// Mail for receiving domains: stored durably before the SMTP 250 (raw bytes, parsed fields,
// attachments, SPF/DKIM/DMARC verdicts), listed and fetched through the API, and announced
// as email.received (architecture.md, Outbound, inbound, tracking). A domain-bound key sees only its domain's mail.

export interface ReceivedScope {
  teamId: number;
  domainId: number | null;
}

export interface ReceivedEmailServiceDeps {
  received: ReceivedEmailsRepository;
  events: EventBus;
  clock: Clock;
}

const list = (json: string | null): string[] => (json ? (JSON.parse(json) as string[]) : []);

export function createReceivedEmailService(deps: ReceivedEmailServiceDeps) {
  function toListItem(r: ReceivedEmailRow) {
    const auth = JSON.parse(r.auth_json) as AuthResults;
    return {
      id: r.id,
      domainId: r.domain_id,
      messageId: r.message_id,
      from: r.from_addr,
      to: list(r.to_json),
      cc: list(r.cc_json),
      replyTo: list(r.reply_to_json),
      subject: r.subject,
      envelope: { mailFrom: r.mail_from, rcptTo: list(r.rcpt_to_json) },
      authResults: { spf: auth.spf, dkim: auth.dkim, dmarc: auth.dmarc },
      attachmentCount: r.attachment_count,
      sizeBytes: r.size_bytes,
      createdAt: r.created_at,
    };
  }

  async function load(scope: ReceivedScope, id: string): Promise<ReceivedEmailRow> {
    if (id.length < 3 || id.length > 100) throw badRequest('id: must be 3 to 100 characters');
    const row = await deps.received.findById(scope.teamId, id);
    if (!row || (scope.domainId !== null && row.domain_id !== scope.domainId)) throw notFound(`received email ${id} not found`);
    return row;
  }

  return {
    /**
     * Stores one message once per receiving domain it was addressed to, in one transaction,
     * then announces each. A copy its domain already has from this very transaction (the
     * sender retried it) is neither stored nor announced again. Returns the ids of the stored
     * copies (for the SMTP reply and logs).
     */
    async store(message: ReceivedMessageInput, targets: { domain: DomainRecord; rcptTo: string[] }[]): Promise<string[]> {
      const nowIso = deps.clock.now().toISOString();
      const attachments = message.attachments.map((a, position) => ({
        position,
        filename: a.filename,
        content_type: a.contentType,
        content_id: a.contentId,
        disposition: a.disposition,
        size_bytes: a.content.length,
        checksum: createHash('sha256').update(a.content).digest('hex'),
        content: a.content,
      }));
      const items: NewReceivedEmail[] = targets.map((t) => ({
        row: {
          id: newId('re'),
          team_id: t.domain.teamId,
          domain_id: t.domain.id,
          message_id: message.messageId,
          mail_from: message.envelope.mailFrom,
          rcpt_to_json: JSON.stringify(t.rcptTo),
          from_addr: message.from,
          to_json: JSON.stringify(message.to),
          cc_json: JSON.stringify(message.cc),
          reply_to_json: JSON.stringify(message.replyTo),
          subject: message.subject,
          text_body: message.text,
          html_body: message.html,
          headers_json: JSON.stringify(message.headers),
          in_reply_to: message.inReplyTo,
          references_json: message.references ? JSON.stringify(message.references) : null,
          date_header: message.date,
          spf_result: message.auth.spf.result,
          dkim_result: message.auth.dkim.result,
          dmarc_result: message.auth.dmarc.result,
          auth_json: JSON.stringify(message.auth),
          remote_ip: message.envelope.remoteIp,
          helo: message.envelope.helo,
          tls: message.envelope.tls ? 1 : 0,
          size_bytes: message.sizeBytes,
          attachment_count: attachments.length,
          created_at: nowIso,
          dedupe_key: transactionKey(message.envelope.mailFrom, t.rcptTo, message.digest),
        },
        raw: message.raw,
        attachments,
      }));
      const received: BusEvent[] = items.map((item) => {
        const row = item.row;
        return {
          type: 'email.received',
          teamId: row.team_id,
          domainId: row.domain_id,
          occurredAt: nowIso,
          data: {
            id: row.id,
            domainId: row.domain_id,
            messageId: row.message_id,
            from: row.from_addr,
            to: message.to,
            cc: message.cc,
            subject: row.subject,
            envelope: { mailFrom: row.mail_from, rcptTo: JSON.parse(row.rcpt_to_json) as string[] },
            authResults: { spf: message.auth.spf.result, dkim: message.auth.dkim.result, dmarc: message.auth.dmarc.result },
            attachmentCount: row.attachment_count,
            sizeBytes: row.size_bytes,
            occurredAt: nowIso,
          },
        };
      });
      // The webhook outbox rows commit with the received emails themselves.
      let announced: BusEvent[] = [];
      const stored = await deps.received.insertMany(items, (storedIds) => {
        announced = received.filter((e) => storedIds.has(e.data.id as string));
        deps.events.inTransaction(announced);
      });
      for (const e of announced) deps.events.emit(e);
      return stored.map((s) => s.id);
    },

    async list(scope: ReceivedScope, q: { offset: number; limit: number; domainIds?: number[] }) {
      // Absent: every domain the scope sees; empty: none (an empty filter never means all).
      if (q.domainIds?.length === 0) return { items: [], total: 0 };
      let domainIds = q.domainIds;
      if (scope.domainId !== null) {
        if (domainIds?.length && !domainIds.includes(scope.domainId)) return { items: [], total: 0 };
        domainIds = [scope.domainId];
      }
      const { rows, total } = await orTooSlow(deps.received.list({ teamId: scope.teamId, domainIds, offset: q.offset, limit: q.limit }));
      return { items: rows.map(toListItem), total };
    },

    async get(scope: ReceivedScope, id: string) {
      const row = await load(scope, id);
      const auth = JSON.parse(row.auth_json) as AuthResults;
      const attachments = await deps.received.attachments(row.id);
      return {
        ...toListItem(row),
        teamId: row.team_id,
        text: row.text_body,
        html: row.html_body,
        headers: JSON.parse(row.headers_json) as { name: string; value: string }[],
        inReplyTo: row.in_reply_to,
        references: row.references_json ? (JSON.parse(row.references_json) as string[]) : [],
        date: row.date_header,
        authenticationResults: auth.header,
        remote: { ip: row.remote_ip, helo: row.helo, tls: row.tls === 1 },
        attachments: attachments.map((a) => ({
          filename: a.filename,
          contentType: a.content_type,
          contentId: a.content_id,
          disposition: a.disposition,
          size: a.size_bytes,
          sha256: a.checksum,
          content: a.content.toString('base64'),
        })),
      };
    },

    /** Whether the message bytes are still kept (content retention empties them). */
    async hasRaw(scope: ReceivedScope, id: string): Promise<boolean> {
      const row = await load(scope, id);
      return deps.received.hasRaw(row.id);
    },

    /** The stored message bytes (message/rfc822). */
    async raw(scope: ReceivedScope, id: string): Promise<{ id: string; raw: Buffer }> {
      const row = await load(scope, id);
      const raw = await deps.received.raw(row.id);
      // Only content retention (retention.contentDays) removes it: the row is stored with it.
      if (!raw) throw notFound(`received email ${id} no longer has its message: content is kept for a set number of days (retention.contentDays)`);
      return { id: row.id, raw };
    },
  };
}
export type ReceivedEmailService = ReturnType<typeof createReceivedEmailService>;
