/**
 * The bounce notice Posthorn mails for a submitted message (submission.bounceNotices): an RFC 3464
 * delivery status notification, multipart/report; report-type=delivery-status (RFC 6522) with a
 * human-readable part, the message/delivery-status part and the original's headers
 * (text/rfc822-headers). From MAILER-DAEMON@<hostname>, signed with the server's key, and sent with
 * the null reverse-path (RFC 3464 §2, RFC 5321 §4.5.5) so it can never bounce back in a loop.
 */
import { randomBytes } from 'node:crypto';
import type { BounceNotice, BounceNoticeOutcome, BounceNoticeRecipient } from '../../core/emails/bounce-notice-service.js';
import type { Clock } from '../../lib/clock.js';
import { composeMessage } from './mime-builder.js';
import type { OwnMailSender } from './own-mail-sender.js';

const TEXT_WIDTH = 76;
/** Headers of the original that describe its body (which is not attached): left out. */
const BODY_HEADER = /^(content-[a-z-]*|mime-version):/i;
const ENHANCED_STATUS = /(?:^|[\s;])([245])\.(\d{1,3})\.(\d{1,3})(?=[\s;.,]|$)/;

/** Printable US-ASCII: the notice is 7-bit, whatever a hostile MX put in its reply. */
const ascii = (s: string) => s.replace(/\r\n|\r|\n|\t/g, ' ').replace(/[^\x20-\x7e]/g, '?');

/** A run without spaces longer than this is cut anyway (a remote reply can be one long token). */
const HARD_WIDTH = 900;

/** Folds a header-like field line at spaces (RFC 5322 §2.2.3), so no line passes 998 octets. */
function fold(line: string): string {
  const out: string[] = [];
  let rest = line;
  while (rest.length > TEXT_WIDTH) {
    const at = rest.lastIndexOf(' ', TEXT_WIDTH);
    let cut = at > 0 ? at : rest.indexOf(' ', TEXT_WIDTH);
    if (cut <= 0 || cut > HARD_WIDTH) {
      if (rest.length <= HARD_WIDTH) break;
      // No space near enough: cut, and the continuation's leading space is one more in the text.
      cut = HARD_WIDTH;
      out.push(rest.slice(0, cut));
      rest = ` ${rest.slice(cut)}`;
      continue;
    }
    out.push(rest.slice(0, cut));
    rest = rest.slice(cut); // the space starts the continuation line
  }
  out.push(rest);
  return out.join('\r\n');
}

/** Wraps prose at spaces for the human-readable part. */
function wrap(text: string, indent = ''): string {
  return fold(text).split('\r\n').map((l, i) => (i ? indent + l.trimStart() : l)).join('\r\n');
}

/** The RFC 3463 status of a failed recipient: a 5.x.x the server (or an inbound DSN) gave, else 5.4.7 at the give-up, else 5.0.0. */
export function failureStatus(r: Pick<BounceNoticeRecipient, 'status' | 'reply' | 'expired'>): string {
  for (const source of [r.status, r.reply]) {
    const m = source ? ENHANCED_STATUS.exec(source) : null;
    if (m && m[1] === '5') return `${m[1]}.${m[2]}.${m[3]}`;
  }
  return r.expired ? '5.4.7' : '5.0.0';
}

/** The original's header block as it was sent (composed again from the stored email), its body headers left out. */
async function originalHeaders(o: BounceNotice['original']): Promise<string> {
  const list = (json: string | null): string[] => (json ? (JSON.parse(json) as string[]) : []);
  const composed = await composeMessage({
    from: o.from_addr,
    to: list(o.to_json),
    cc: list(o.cc_json),
    replyTo: [],
    subject: o.subject,
    text: ' ',
    headers: o.headers_json ? (JSON.parse(o.headers_json) as Record<string, string>) : {},
    attachments: [],
    messageId: o.message_id,
    date: new Date(o.created_at),
    inReplyTo: o.in_reply_to,
    references: list(o.references_json),
  });
  const head = composed.toString('latin1');
  const block = head.slice(0, Math.max(0, head.indexOf('\r\n\r\n')));
  const fields: string[] = [];
  for (const line of block.split('\r\n')) {
    if (/^[ \t]/.test(line) && fields.length) fields[fields.length - 1] += `\r\n${line}`;
    else fields.push(line);
  }
  return fields.filter((f) => !BODY_HEADER.test(f)).join('\r\n');
}

export async function composeBounceNotice(input: { notice: BounceNotice; hostname: string; date: Date; messageId: string }): Promise<Buffer> {
  const { notice, hostname } = input;
  const boundary = `dsn-${randomBytes(12).toString('hex')}`;
  const rfcDate = (d: Date) => d.toUTCString().replace('GMT', '+0000');
  const human: string[] = [];
  const status: string[] = [fold(`Reporting-MTA: dns; ${hostname}`), `Arrival-Date: ${rfcDate(new Date(notice.original.created_at))}`];
  for (const r of notice.recipients) {
    const address = ascii(r.address);
    human.push(wrap(`<${address}>: ${ascii(r.reason)}`, '    '), '');
    status.push(
      '',
      `Final-Recipient: rfc822; ${address}`,
      'Action: failed',
      `Status: ${failureStatus(r)}`,
      ...(r.mxHost ? [`Remote-MTA: dns; ${ascii(r.mxHost)}`] : []),
      // The remote reply as given; an inbound DSN's diagnostic already names its type ("smtp; ...").
      ...(r.reply && (r.smtpCode !== null || /^[a-z-]+;/i.test(r.reply)) ? [fold(`Diagnostic-Code: ${/^[a-z-]+;/i.test(r.reply) ? ascii(r.reply) : `smtp; ${ascii(r.reply)}`}`)] : []),
    );
  }
  const lines = [
    `From: Mail Delivery System <MAILER-DAEMON@${hostname}>`,
    // The address as its UTF-8 bytes (SMTPUTF8), like the rest of this byte string.
    `To: <${Buffer.from(notice.to, 'utf8').toString('latin1')}>`,
    'Subject: Undelivered Mail Returned to Sender',
    `Date: ${rfcDate(input.date)}`,
    `Message-ID: <${input.messageId}>`,
    'MIME-Version: 1.0',
    // RFC 3834 §5: a DSN is an automatic response; nobody should auto-reply to it.
    'Auto-Submitted: auto-replied',
    'Content-Type: multipart/report; report-type=delivery-status;',
    ` boundary="${boundary}"`,
    '',
    'This is a MIME-encapsulated message.',
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    'Content-Description: Notification',
    'Content-Transfer-Encoding: 7bit',
    '',
    `This is the mail system at ${hostname}.`,
    '',
    // The subject only when it reads as written here (the attached headers have it either way).
    wrap(`Your message${/^[\x20-\x7e]*$/.test(notice.original.subject) ? ` "${notice.original.subject}"` : ''} could not be delivered to ${notice.recipients.length === 1 ? 'this recipient' : 'these recipients'}; its headers are attached below.`),
    '',
    ...human,
    `--${boundary}`,
    'Content-Type: message/delivery-status',
    'Content-Description: Delivery report',
    '',
    ...status,
    '',
    `--${boundary}`,
    'Content-Type: text/rfc822-headers',
    'Content-Description: Undelivered Message Headers',
    '',
    await originalHeaders(notice.original),
    '',
    `--${boundary}--`,
    '',
  ];
  return Buffer.from(lines.join('\r\n'), 'latin1');
}

/** Sends a notice through Posthorn's own mail (signed with the server's key); the outcome says whether trying again could help. */
export function createBounceNoticeMailer(opts: { ownMail: OwnMailSender; hostname: string; clock: Clock }) {
  return async (notice: BounceNotice): Promise<BounceNoticeOutcome> => {
    const raw = await composeBounceNotice({ notice, hostname: opts.hostname, date: opts.clock.now(), messageId: `dsn.${randomBytes(8).toString('hex')}@${opts.hostname}` });
    // The null reverse-path: a notice about a notice is never sent.
    // The sender's domain's MTA-STS and DANE apply: the notice carries the original's headers.
    return opts.ownMail.send({ mailFrom: '', to: notice.to, raw, policies: true });
  };
}
