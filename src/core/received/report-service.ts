import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { DeliveriesRepository, DeliveryRow, StatusEventWrite } from '../../store/repositories/deliveries-repository.js';
import type { EmailRow, EmailsRepository } from '../../store/repositories/emails-repository.js';
import type { InboundReportsRepository, ReportEffects, ReportStep } from '../../store/repositories/inbound-reports-repository.js';
import type { InboundReportKind } from '../../store/tables/database.js';
import { addressKey } from '../emails/addresses.js';
import { statusEventType, statusRank, type EmailStatus } from '../emails/email-status.js';
import type { EventBus } from '../events.js';
import type { DsnRecipient, InboundEnvelope, ParsedReport } from './inbound-types.js';
import { splitAddress, verpToken, type InboundRoute, type InboundRouter, type TagScope } from './inbound-router.js';
import { emailBusEvent } from '../emails/email-bus-event.js';
import { bounceSubType } from '../deliveries/bounce-sub-type.js';
import { messageDigest, transactionKey } from './transaction-key.js';

// Asynchronous bounces (RFC 3464 DSNs, and plain-text bounces read into DSN blocks) and complaints (RFC 5965 ARF) that come back to the
// inbound listener. A report is linked to the email it is about, most reliable first:
// the VERP token of the address it came to, a return path quoted inside the report, our
// X-Posthorn-Email-ID header in the returned message, and its Message-ID. Reports are not
// authenticated and every recipient of an email sees its return path, Message-ID and To/Cc, so
// a report acts only on the deliveries its evidence covers: a return path tagged for one
// recipient covers that delivery, one tagged for a domain the recipients at that domain
// (return-path-token.ts), and evidence every copy carries (our header, the Message-ID, an
// untagged return path) an email with one recipient only. Its effects on
// deliveries, status events and suppressions are stored in the same transaction as the
// report itself, before the SMTP 250. A report the sender sends again (it retried after our
// 451, or our 250 was lost) is recognised by its transaction key and changes nothing twice.
// Another report about the same copy records only news (docs/inbound.md, Several reports about
// one copy): each event is a webhook and a count, and a recipient bounces and complains once.
// A plain-text bounce (docs/inbound.md, Plain-text bounces) is weaker evidence than a DSN: it acts
// only when it came to a VERP return path, and only on a delivery of that email, in the token's
// scope, whose recipient it names exactly.

/**
 * RFC 5965 7.3 feedback types that mean "this mail is unwanted or harmful to the recipient"
 * ('' : a report without the field). not-spam (RFC 6430) and auth-failure (RFC 6591, about our
 * authentication, not the recipient's wish) are not among them.
 */
const COMPLAINT_TYPES = new Set(['abuse', 'fraud', 'virus', 'other', '']);

type LinkedBy = 'verp' | 'report' | 'header' | 'message-id';

export interface ReportIntake {
  envelope: InboundEnvelope;
  /** The bounce/complaint routes the transaction's recipients resolved to. */
  routes: Extract<InboundRoute, { kind: 'bounce' | 'complaint' }>[];
  report: ParsedReport;
  raw: Buffer;
}

export interface ReportOutcome {
  reportId: number;
  kind: InboundReportKind;
  emailId: string | null;
  /** The team already had this report from an earlier attempt of the same transaction: nothing was recorded. */
  duplicate: boolean;
}

export interface ReportServiceDeps {
  router: InboundRouter;
  emails: EmailsRepository;
  deliveries: DeliveriesRepository;
  reports: InboundReportsRepository;
  events: EventBus;
  clock: Clock;
  logger: Logger;
}

/** The email's deliveries, and those among them a report's evidence covers. */
interface Scope {
  all: DeliveryRow[];
  deliveries: DeliveryRow[];
}

interface Announcement {
  status: Exclude<EmailStatus, 'SCHEDULED'>;
  data: Record<string, unknown>;
}

export function createReportService(deps: ReportServiceDeps) {
  const { router, clock } = deps;

  /** Finds the email a report is about, or null. Reports at return paths stay within those domains. */
  async function link(intake: ReportIntake): Promise<{ email: EmailRow; by: LinkedBy; tagged: TagScope | null } | null> {
    const bounceRoutes = intake.routes.filter((r): r is Extract<InboundRoute, { kind: 'bounce' }> => r.kind === 'bounce');
    const viaVerp = bounceRoutes.find((r) => r.email);
    if (viaVerp?.email) return { email: viaVerp.email, by: 'verp', tagged: viaVerp.tagged };
    // A text bounce names its email by the return path's token only: its quoted original is prose.
    if (intake.report.type === 'text') return null;
    // Came to tokenless return paths: whatever we find must be from one of those domains. The
    // shared complaint address links any team's email, but only for what it acts on (ARF): a
    // DSN acts through the return paths it came to, so a complaint address beside them must
    // not widen it to other teams' email.
    const atComplaint = intake.routes.some((r) => r.kind === 'complaint') && !(intake.report.type === 'dsn' && bounceRoutes.length);
    const allowedDomains = atComplaint ? null : new Set(bounceRoutes.flatMap((r) => r.domains.map((d) => d.id)));
    const allowed = (row: EmailRow | undefined): row is EmailRow =>
      !!row && (allowedDomains === null || (row.domain_id !== null && allowedDomains.has(row.domain_id)));

    // A return path quoted by the reporter: ARF Original-Mail-From, or the Return-Path the
    // final MTA wrote into the returned message (RFC 5321 4.4).
    for (const quoted of [intake.report.feedback?.originalMailFrom, intake.report.original?.returnPath]) {
      if (!quoted) continue;
      const token = verpToken(quoted);
      const split = splitAddress(quoted.replace(/^<|>$/g, '').trim());
      if (!token || !split) continue;
      // A deleted domain's tagged return path still names its email for a while (inbound-router.ts).
      const found = await router.tokenAt(split.domain, token);
      if (found && allowed(found.email)) return { email: found.email, by: 'report', tagged: found.tagged };
    }
    const headerId = intake.report.original?.posthornEmailId;
    if (headerId && /^em_[A-Za-z0-9]{1,100}$/.test(headerId)) {
      const row = await deps.emails.findByIdAnyTeam(headerId);
      if (allowed(row)) return { email: row, by: 'header', tagged: null };
    }
    const messageId = intake.report.original?.messageId;
    if (messageId) {
      const normalized = messageId.startsWith('<') ? messageId : `<${messageId}>`;
      const row = await deps.emails.findByMessageId(normalized);
      if (allowed(row)) return { email: row, by: 'message-id', tagged: null };
    }
    return null;
  }

  /**
   * The deliveries a report's evidence covers (see the top): a tagged transaction's, or, for
   * evidence every copy carries, an email's only one (any recipient of a larger email could
   * have written it about any other).
   */
  function inScope(all: DeliveryRow[], tagged: TagScope | null): DeliveryRow[] {
    if (tagged === null) return all.length <= 1 ? all : [];
    if ('recipient' in tagged) return all.filter((d) => addressKey(d.recipient) === tagged.recipient);
    return all.filter((d) => d.rcpt_domain.toLowerCase() === tagged.rcptDomain);
  }

  /** The delivery in scope a report names: its recipient, else the only one in scope. */
  function matchDelivery(scope: Scope, ...addresses: (string | null | undefined)[]): DeliveryRow | undefined {
    const keys = addresses.filter((a): a is string => !!a).map(addressKey);
    for (const key of keys) {
      const hit = scope.deliveries.find((d) => addressKey(d.recipient) === key);
      if (hit) return hit;
    }
    // Naming another recipient of the email is a claim about someone the evidence does not cover.
    if (keys.some((k) => scope.all.some((d) => addressKey(d.recipient) === k))) return undefined;
    // Forwarders and redacting feedback loops (AOL writes "redacted@...") rewrite the
    // recipient; with a single recipient in scope there is no doubt which one it was.
    return scope.deliveries.length === 1 ? scope.deliveries[0] : undefined;
  }

  function dsnData(r: DsnRecipient, reportingMta: string | null) {
    return {
      reportingMta,
      remoteMta: r.remoteMta,
      action: r.action,
      status: r.status,
      diagnosticCode: r.diagnosticCode,
    };
  }

  /** Where a block came from, for the event data and the delivery row. */
  function origin(r: DsnRecipient, report: ParsedReport) {
    if (r.source !== 'text') return { source: 'dsn', label: 'DSN', detail: { dsn: dsnData(r, report.reportingMta) } };
    return {
      source: 'text',
      label: 'text bounce',
      detail: { text: { evidence: report.textBounce?.evidence ?? null, reportingMta: report.reportingMta, action: r.action, status: r.status, diagnosticCode: r.diagnosticCode } },
    };
  }

  function planDsn(email: EmailRow, scope: Scope, report: ParsedReport, nowIso: string) {
    const effects: ReportEffects = { steps: [] };
    const announce: Announcement[] = [];
    for (const r of report.recipients) {
      if (r.action !== 'failed' && r.action !== 'delayed') continue; // delivered/relayed/expanded: success notices
      // A text bounce names its recipient or nothing: no single-recipient fallback, no rewritten address.
      const delivery =
        r.source === 'text' ? scope.deliveries.find((d) => !!r.finalRecipient && addressKey(d.recipient) === addressKey(r.finalRecipient)) : matchDelivery(scope, r.finalRecipient, r.originalRecipient);
      // A block about no delivery the evidence covers changes nothing (the report is kept).
      if (!delivery) continue;
      const recipient = delivery.recipient;
      const response = r.diagnosticCode ?? (r.status ? `status ${r.status}` : `action ${r.action}`);
      const reporter = report.reportingMta ? ` (reported by ${report.reportingMta})` : '';
      const from = origin(r, report);
      const base = { recipient, smtpCode: r.smtpCode, response, source: from.source, ...from.detail };
      // A copy bounces once, and a bounce is final: a failed or delayed block about a copy that
      // has bounced (an earlier report, the remote's reply during delivery) is only kept.
      if (r.action === 'failed') {
        const data = {
          ...base,
          bounce: { type: r.hardBounce ? 'Permanent' : 'Transient', subType: bounceSubType({ category: r.category, response }), category: r.category, message: response },
        };
        effects.steps.push({
          deliveryId: delivery.id,
          recipient,
          unless: 'BOUNCED',
          event: event(email.id, 'BOUNCED', data, nowIso),
          delivery: { state: 'bounced', fromStates: ['delivered'], code: r.smtpCode, response: `${from.label}${reporter}: ${response}`, at: nowIso },
          ...(r.hardBounce ? { suppression: { teamId: email.team_id, email: addressKey(recipient), reason: 'HARD_BOUNCE', source: email.id, at: nowIso } } : {}),
        });
        announce.push({ status: 'BOUNCED', data });
      } else {
        // Each delay notice is news (remotes warn more than once), until the copy bounces.
        const data = { ...base, willRetryUntil: r.willRetryUntil };
        effects.steps.push({
          deliveryId: delivery.id,
          recipient,
          unless: 'BOUNCED',
          event: event(email.id, 'DELIVERY_DELAYED', data, nowIso),
          delivery: { code: r.smtpCode, response: `delayed ${from.label}${reporter}: ${response}`, at: nowIso },
        });
        announce.push({ status: 'DELIVERY_DELAYED', data });
      }
    }
    return { effects, announce, kind: dsnKind(report) };
  }

  function dsnKind(report: ParsedReport): InboundReportKind {
    return report.recipients.some((r) => r.action === 'failed') ? 'bounce' : report.recipients.some((r) => r.action === 'delayed') ? 'delay' : 'notification';
  }

  function planComplaint(email: EmailRow, scope: Scope, report: ParsedReport, nowIso: string) {
    const effects: ReportEffects = { steps: [] };
    const announce: Announcement[] = [];
    const fb = report.feedback!;
    if (!COMPLAINT_TYPES.has(fb.feedbackType)) {
      // not-spam, auth-failure (RFC 6591) and the like: kept as a report, not a complaint.
      return { effects, announce, kind: 'feedback' as const };
    }
    // Original-Rcpt-To names the complainer; failing that (redacted), a To header that
    // matches exactly one of our recipients in scope does.
    let delivery = matchDelivery(scope, ...fb.originalRcptTo);
    if (!delivery && !fb.originalRcptTo.some((a) => scope.all.some((d) => addressKey(d.recipient) === addressKey(a)))) {
      const keys = new Set((report.original?.to ?? []).map(addressKey));
      const hits = scope.deliveries.filter((d) => keys.has(addressKey(d.recipient)));
      if (hits.length === 1) delivery = hits[0];
    }
    // A complaint about no delivery the evidence covers changes nothing (the report is kept).
    if (!delivery) return { effects, announce, kind: 'complaint' as const };
    const recipient = delivery.recipient;
    const data = {
      recipient,
      source: 'arf',
      complaint: {
        feedbackType: fb.feedbackType || 'abuse',
        userAgent: fb.userAgent,
        arrivalDate: fb.arrivalDate,
        sourceIp: fb.sourceIp,
        reportingMta: report.reportingMta,
        reportedRecipients: fb.originalRcptTo,
      },
    };
    // A recipient complains about an email once: a later complaint of theirs about it is only
    // kept. Only the recipient that complained is suppressed (architecture.md, Decisions: suppressions).
    const step: ReportStep = {
      deliveryId: delivery.id,
      recipient,
      unless: 'COMPLAINED',
      event: event(email.id, 'COMPLAINED', data, nowIso),
      suppression: { teamId: email.team_id, email: addressKey(recipient), reason: 'COMPLAINT', source: email.id, at: nowIso },
    };
    effects.steps.push(step);
    announce.push({ status: 'COMPLAINED', data });
    return { effects, announce, kind: 'complaint' as const };
  }

  function event(emailId: string, status: Exclude<EmailStatus, 'SCHEDULED'>, data: unknown, at: string): StatusEventWrite {
    return { emailId, status, rank: statusRank(status), data, at };
  }

  return {
    /** Stores one accepted report and applies what it says; resolves before the SMTP 250. */
    async record(intake: ReportIntake): Promise<ReportOutcome> {
      const nowIso = clock.now().toISOString();
      const { report, envelope } = intake;
      const linked = report.type === 'other' ? null : await link(intake);
      let plan: { effects: ReportEffects; announce: Announcement[]; kind: InboundReportKind } = {
        effects: { steps: [] },
        announce: [],
        kind: 'unparsed',
      };
      // A DSN acts only when it came back to a return path (RFC 3464 2.2: it is sent to the
      // envelope sender); one sent to the complaint address is kept, not applied.
      const toReturnPath = intake.routes.some((r) => r.kind === 'bounce');
      const scopeOf = async (l: NonNullable<typeof linked>): Promise<Scope> => {
        const all = await deps.deliveries.listForEmail(l.email.id);
        return { all, deliveries: inScope(all, l.tagged) };
      };
      if (linked && (report.type === 'dsn' || report.type === 'text') && toReturnPath) {
        plan = planDsn(linked.email, await scopeOf(linked), report, nowIso);
      } else if (linked && report.type === 'arf' && report.feedback) {
        plan = planComplaint(linked.email, await scopeOf(linked), report, nowIso);
      } else if (report.type === 'dsn' || report.type === 'text') {
        // Unlinked, or not at a return path: recorded by kind, nothing changed.
        plan.kind = dsnKind(report);
      } else if (report.type === 'arf') {
        plan.kind = COMPLAINT_TYPES.has(report.feedback?.feedbackType ?? '') ? 'complaint' : 'feedback';
      }
      const summary = {
        type: report.type,
        subject: report.subject,
        from: report.from,
        reportingMta: report.reportingMta,
        recipients: report.recipients.map((r) => ({ finalRecipient: r.finalRecipient, action: r.action, status: r.status, diagnosticCode: r.diagnosticCode })),
        feedback: report.feedback,
        original: report.original,
        ...(report.textBounce ? { textBounce: report.textBounce } : {}),
      };
      // The steps that were news, and only they, are announced: their webhook outbox rows
      // commit with the report's effects.
      const announcements = linked ? plan.announce.map((a) => emailBusEvent(statusEventType(a.status), linked.email, a.status, nowIso, a.data)) : [];
      let announced: typeof announcements = [];
      const dedupeKey = transactionKey(envelope.mailFrom, intake.routes.map((r) => r.address), messageDigest(intake.raw));
      const { id: reportId, duplicate } = await deps.reports.record(
        {
          kind: plan.kind,
          team_id: linked?.email.team_id ?? null,
          email_id: linked?.email.id ?? null,
          linked_by: linked?.by ?? null,
          mail_from: envelope.mailFrom,
          rcpt_to_json: JSON.stringify(envelope.rcptTo),
          remote_ip: envelope.remoteIp,
          summary_json: JSON.stringify(summary),
          raw: intake.raw,
          created_at: nowIso,
          dedupe_key: dedupeKey,
        },
        plan.effects,
        (applied) => {
          announced = applied.map((i) => announcements[i]!);
          deps.events.inTransaction(announced);
        },
      );
      if (duplicate) {
        deps.logger.info({ reportId, rcptTo: envelope.rcptTo }, 'inbound report already recorded from an earlier attempt of this message; nothing recorded again');
      } else if (linked) {
        for (const e of announced) deps.events.emit(e);
      } else if (report.type !== 'other') {
        deps.logger.warn({ reportId, kind: plan.kind, rcptTo: envelope.rcptTo }, 'inbound report could not be linked to an email; kept in inbound_reports');
      }
      return { reportId, kind: plan.kind, emailId: linked?.email.id ?? null, duplicate };
    },
  };
}
export type ReportService = ReturnType<typeof createReportService>;
