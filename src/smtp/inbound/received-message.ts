import type { AuthenticateResult, DNSResolver } from 'mailauth';
import type { ParsedMail } from 'mailparser';
import type { AuthResults, InboundEnvelope, ReceivedMessageInput } from '../../core/received/inbound-types.js';
import { messageDigest } from '../../core/received/transaction-key.js';
import { replaceUnstorable } from '../../lib/nul-text.js';
import { formatMailboxes, headerFields } from '../parsed-mail.js';

// Turns a message for a receiving domain into what core stores: parsed fields as far as the
// MIME parses, attachments, and SPF (RFC 7208) / DKIM (RFC 6376) / DMARC (RFC 7489) verdicts
// from mailauth, checked through Posthorn's own resolver. The stored bytes get the trace
// fields a final-delivery MTA adds on top (RFC 5321 4.4: Return-Path and Received; RFC 8601:
// Authentication-Results), so the raw message shows where and how it came in.

/** Upper bound on all DNS work for one message's checks (SPF allows 10 lookups, RFC 7208 4.6.4). */
const AUTH_TIMEOUT_MS = 60_000;

export interface ReceivedMessageContext {
  envelope: InboundEnvelope;
  hostname: string;
  resolver: DNSResolver;
  /** Id for the Received header (the first stored id, or a transaction id). */
  traceId: string;
  now: Date;
}

function tempError(header: string): AuthResults {
  const none = { result: 'temperror', domain: null };
  return { spf: none, dkim: { result: 'temperror', signatures: [] }, dmarc: { ...none, policy: null }, header };
}

/** IPv4-mapped IPv6 ("::ffff:1.2.3.4") as the IPv4 address SPF records are written for. */
export function plainIp(ip: string | null): string | null {
  if (!ip) return null;
  return ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip;
}

export async function checkAuthentication(raw: Buffer, ctx: ReceivedMessageContext): Promise<{ results: AuthResults; headers: string }> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), AUTH_TIMEOUT_MS);
    timer.unref();
  });
  let res: AuthenticateResult | null;
  try {
    // Loaded with the first message received: ~35 MB a server that only sends never needs.
    const { authenticate } = await import('mailauth');
    res = await Promise.race([
      authenticate(raw, {
        ip: plainIp(ctx.envelope.remoteIp) ?? undefined,
        helo: ctx.envelope.helo ?? undefined,
        sender: ctx.envelope.mailFrom,
        mta: ctx.hostname,
        resolver: ctx.resolver,
        // BIMI fetches logos and certificates over HTTPS; nothing here shows them.
        disableBimi: true,
      }),
      timedOut,
    ]);
  } catch {
    res = null;
  } finally {
    clearTimeout(timer);
  }
  if (!res) {
    const header = `Authentication-Results: ${ctx.hostname}; spf=temperror; dkim=temperror; dmarc=temperror`;
    return { results: tempError(header), headers: `${header}\r\n` };
  }
  const signatures = (res.dkim?.results ?? [])
    // An unsigned message comes back as one placeholder "none" result with no domain.
    .filter((r) => r.signingDomain || r.status?.result !== 'none')
    .map((r) => ({
      result: r.status?.result ?? 'none',
      domain: r.signingDomain ?? null,
      selector: r.selector ?? null,
      aligned: !!r.status?.aligned,
    }));
  // RFC 7489 4.2: one passing signature is enough; otherwise report the first verdict.
  const dkim = signatures.some((s) => s.result === 'pass') ? 'pass' : (signatures[0]?.result ?? 'none');
  const authHeader = /(^|\r\n)(Authentication-Results:[\s\S]*?)(?=\r\n(?![ \t])|$)/.exec(res.headers)?.[2] ?? '';
  const results: AuthResults = {
    spf: { result: res.spf ? res.spf.status.result : 'none', domain: res.spf ? res.spf.domain || null : null },
    dkim: { result: dkim, signatures },
    dmarc: res.dmarc
      ? { result: res.dmarc.status.result, domain: res.dmarc.domain || null, policy: res.dmarc.policy || null }
      : { result: 'none', domain: null, policy: null },
    header: authHeader,
  };
  return { results, headers: res.headers };
}

/** RFC 5321 4.4 time-stamp line. */
function receivedHeader(ctx: ReceivedMessageContext, rcpt: string | undefined): string {
  const e = ctx.envelope;
  const ip = plainIp(e.remoteIp) ?? 'unknown';
  const helo = (e.helo ?? 'unknown').replace(/[^\x21-\x7e]/g, '');
  const proto = e.tls ? 'ESMTPS' : 'ESMTP';
  const forPart = rcpt ? `\r\n\tfor <${rcpt.replace(/[<>\s]/g, '')}>` : '';
  return `Received: from ${helo} ([${ip}])\r\n\tby ${ctx.hostname} (Posthorn) with ${proto} id ${ctx.traceId}${forPart};\r\n\t${ctx.now.toUTCString().replace('GMT', '+0000')}\r\n`;
}

export async function buildReceivedMessage(raw: Buffer, parsed: ParsedMail | null, ctx: ReceivedMessageContext): Promise<ReceivedMessageInput> {
  const { results, headers } = await checkAuthentication(raw, ctx);
  const e = ctx.envelope;
  const trace =
    `Return-Path: <${e.mailFrom.replace(/[<>\s]/g, '')}>\r\n` + headers + receivedHeader(ctx, e.rcptTo.length === 1 ? e.rcptTo[0] : undefined);
  const stored = Buffer.concat([Buffer.from(trace, 'utf8'), raw]);
  const refs = parsed?.references;
  // Another server's text may hold NUL or an unpaired surrogate, which no store keeps alike
  // (lib/nul-text.ts): the parsed fields show U+FFFD in their place; the raw message keeps every byte.
  return replaceUnstorable({
    envelope: e,
    raw: stored,
    sizeBytes: raw.length,
    digest: messageDigest(raw),
    messageId: parsed?.messageId ?? null,
    from: parsed?.from ? (formatMailboxes(parsed.from)[0] ?? parsed.from.text ?? null) : null,
    to: formatMailboxes(parsed?.to),
    cc: formatMailboxes(parsed?.cc),
    replyTo: formatMailboxes(parsed?.replyTo),
    subject: parsed?.subject ?? null,
    text: parsed?.text ?? null,
    html: parsed?.html || null,
    headers: headerFields(parsed?.headerLines),
    inReplyTo: parsed?.inReplyTo ?? null,
    references: refs === undefined ? null : Array.isArray(refs) ? refs : [refs],
    date: parsed?.date && !Number.isNaN(parsed.date.getTime()) ? parsed.date.toISOString() : null,
    attachments: (parsed?.attachments ?? []).map((a) => ({
      filename: a.filename ?? null,
      contentType: a.contentType || 'application/octet-stream',
      contentId: a.cid ?? null,
      disposition: a.contentDisposition ?? null,
      content: a.content,
    })),
    auth: results,
  });
}
