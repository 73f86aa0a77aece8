import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import type { SandboxMessageRow, SandboxMessagesRepository } from '../../store/repositories/sandbox-messages-repository.js';
import { notFound } from '../errors.js';
import { orTooSlow } from '../query-too-slow.js';

// Sandbox mode's capture mailbox (architecture.md, Decisions: sandbox mode). The engine hands
// each signed message to the sandbox transport instead of an MX; the transport files it here,
// and the API lists it for the sending team. Outside sandbox mode there is no mailbox: the
// routes answer 404.

export interface SandboxScope {
  teamId: number;
  /** A key bound to a domain sees only the messages sent from that domain. */
  domainId: number | null;
}

/** The parts of a captured message, read from its bytes (the transport parses it). */
export interface SandboxParsedMessage {
  from: string | null;
  to: string[];
  cc: string[];
  replyTo: string[];
  subject: string | null;
  messageId: string | null;
  date: string | null;
  /** In message order, unfolded but not decoded. */
  headers: { name: string; value: string }[];
  text: string | null;
  html: string | null;
  /** Their bytes are in the raw message. */
  attachments: { filename: string | null; contentType: string; size: number }[];
}

export interface CaptureInput {
  teamId: number;
  domainId: number;
  emailId: string;
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
  parsed: SandboxParsedMessage;
}

export interface SandboxServiceDeps {
  messages: SandboxMessagesRepository;
  clock: Clock;
  /** config.sandbox: whether the mailbox exists at all. */
  enabled: boolean;
}

export function createSandboxService(deps: SandboxServiceDeps) {
  function listItem(r: SandboxMessageRow) {
    return {
      id: r.id,
      emailId: r.email_id,
      envelope: { mailFrom: r.mail_from, rcptTo: JSON.parse(r.rcpt_to_json) as string[] },
      subject: r.subject,
      receivedAt: r.created_at,
    };
  }

  function ensureEnabled(): void {
    if (!deps.enabled) throw notFound('sandbox mode is off: there is no capture mailbox (set sandbox = true, or POSTHORN_SANDBOX=true, to turn it on)');
  }

  return {
    enabled: deps.enabled,

    /** Files one message; resolves once it is stored (the transport then reports it delivered). */
    async capture(input: CaptureInput): Promise<{ id: string }> {
      const id = newId('sm');
      await deps.messages.insert(
        {
          id,
          team_id: input.teamId,
          domain_id: input.domainId,
          email_id: input.emailId,
          mail_from: input.mailFrom,
          rcpt_to_json: JSON.stringify(input.rcptTo),
          subject: input.parsed.subject,
          size_bytes: input.raw.length,
          parsed_json: JSON.stringify(input.parsed),
          created_at: deps.clock.now().toISOString(),
        },
        input.raw,
      );
      return { id };
    },

    async list(scope: SandboxScope, q: { offset: number; limit: number }) {
      ensureEnabled();
      const { rows, total } = await orTooSlow(deps.messages.list({ teamId: scope.teamId, domainId: scope.domainId, offset: q.offset, limit: q.limit }));
      return { items: rows.map(listItem), total };
    },

    async get(scope: SandboxScope, id: string) {
      ensureEnabled();
      const row = await deps.messages.findById(scope.teamId, id);
      if (!row || (scope.domainId !== null && row.domain_id !== scope.domainId)) {
        // The id a send returns is the email's (em_...); its captured messages have their own.
        if (id.startsWith('em_')) throw notFound(`${id} is an email id, not a sandbox message id (sm_...): GET /v1/sandbox/messages lists the captured messages with their emailId`);
        throw notFound(`sandbox message ${id} not found`);
      }
      const raw = (await deps.messages.raw(row.id)) ?? Buffer.alloc(0);
      return {
        ...listItem(row),
        domainId: row.domain_id,
        sizeBytes: row.size_bytes,
        raw: raw.toString('utf8'),
        parsed: JSON.parse(row.parsed_json) as SandboxParsedMessage,
      };
    },
  };
}
export type SandboxService = ReturnType<typeof createSandboxService>;
