// Forged and genuine bounce (RFC 3464 DSN) and complaint (RFC 5965 ARF) reports for the report
// fuzz. fast-check draws a report's shape relative to an anchor copy (one team's email, one of
// its transactions): where it is sent, whom it names and which evidence it quotes, each from the
// anchor itself, a co-recipient, another email of the team, the other team, or made up. The
// shape is resolved against the run's fresh scenario into concrete addresses and bytes.
//
// A run is a sequence of reports against one scenario (runShape): after the first, each is
// about the same copy, another copy of the same email, or anything, or is the previous report
// again, as a new message (resent) or as the very same bytes (retried).

import { domainToUnicode } from 'node:url';
import fc from 'fast-check';
import { headerBlock, type Scenario, type ScenarioEmail, type Transaction } from './report-world.js';

export const COMPLAINT_ADDRESS = 'complaints@mx.posthorn.test';

const TARGETS = [
  'anchor', // the anchor copy's own return path
  'anchor-lower', // the same, lower-cased by an MTA
  'anchor-upper',
  'sibling', // another transaction of the same email
  'other-email', // a transaction of another email of the team
  'other-team', // the other team's copy
  'untagged', // the anchor's token without its tag (email-wide evidence)
  'plain', // bounces@ at the anchor team's return-path host
  'plain-other-team',
  'complaint',
  'wrong-tag', // the anchor email's id with a made-up tag
  'unknown-token', // an email id that does not exist
  'unknown-untagged',
  'cross-token', // the other team's genuine token at the anchor team's host
  'swapped-tag', // the anchor email's id with another email's tag
  'no-mailbox', // postmaster@ at the return-path host
] as const;
export type TargetKind = (typeof TARGETS)[number];

const QUOTED_RETURN_PATHS = ['anchor', 'sibling', 'other-email', 'other-team', 'untagged', 'wrong-tag', 'cross-token', 'none'] as const;
type QuotedReturnPath = (typeof QUOTED_RETURN_PATHS)[number];
const EMAIL_EVIDENCE = ['anchor', 'other-email', 'other-team', 'unknown', 'none'] as const;
type EmailEvidence = (typeof EMAIL_EVIDENCE)[number];
// `-unicode`: the domain in U-labels, upper-cased (the send and the envelope have A-labels, or
// the send had U-labels in another case); `-xtext`: RFC 6533's `utf-8;` address with
// \x{HEX} for each non-ASCII character (a DSN only; an ARF gets the `-unicode` spelling).
const NAMES = ['anchor', 'anchor-mate', 'anchor-upper', 'anchor-unicode', 'anchor-xtext', 'mate-unicode', 'co', 'co-unicode', 'co-xtext', 'same-team', 'other-team', 'random', 'redacted'] as const;
type NameKind = (typeof NAMES)[number];

export type DsnStatus = 'dead' | 'policy' | 'delayed' | 'delivered';
/** 'none': a report without the Feedback-Type field. */
export type FeedbackType = 'abuse' | 'fraud' | 'virus' | 'other' | 'not-spam' | 'auth-failure' | 'none';

export interface ReportShape {
  kind: 'dsn' | 'arf';
  anchor: { team: number; email: number; transaction: number };
  target: TargetKind;
  /** The complaint address as a second envelope recipient. */
  alsoComplaint: boolean;
  /** DSN: Final-Recipient, then Original-Recipient; ARF: the Original-Rcpt-To fields. Empty: absent. */
  names: NameKind[];
  /** DSN: a second recipient block, naming this one (null: one block; 'none': without Final-Recipient). */
  secondBlock: NameKind | 'none' | null;
  /** The returned original's Return-Path field (RFC 5321 4.4). */
  returnPath: QuotedReturnPath;
  /** ARF Original-Mail-From. */
  originalMailFrom: QuotedReturnPath;
  header: EmailEvidence;
  messageId: EmailEvidence;
  redactTo: boolean;
  headersOnly: boolean;
  status: DsnStatus;
  feedback: FeedbackType;
  /** The Feedback-Type value upper-cased. */
  shoutFeedback: boolean;
}

export const reportShape: fc.Arbitrary<ReportShape> = fc.record({
  kind: fc.constantFrom('dsn' as const, 'arf' as const),
  // the grouped email (2) twice as often: its domain tag is the one transaction covering two
  anchor: fc.record({ team: fc.integer({ min: 0, max: 1 }), email: fc.constantFrom(0, 1, 2, 2), transaction: fc.integer({ min: 0, max: 2 }) }),
  // genuine return paths more often than the rest (they are where effects happen), and the
  // complaint address and plain bounces@, where only the evidence inside links the report
  target: fc.oneof(
    { weight: 3, arbitrary: fc.constant<TargetKind>('anchor') },
    { weight: 3, arbitrary: fc.constantFrom<TargetKind>('complaint', 'plain') },
    { weight: 8, arbitrary: fc.constantFrom(...TARGETS) },
  ),
  alsoComplaint: fc.boolean(),
  names: fc.array(fc.oneof({ weight: 2, arbitrary: fc.constant<NameKind>('anchor') }, { weight: 5, arbitrary: fc.constantFrom(...NAMES) }), { minLength: 0, maxLength: 2 }),
  // often none, so that the evidence every copy carries (header, Message-ID) links the report
  secondBlock: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom<NameKind | 'none'>(...NAMES, 'none') }),
  returnPath: fc.oneof({ weight: 1, arbitrary: fc.constant<QuotedReturnPath>('none') }, { weight: 1, arbitrary: fc.constantFrom(...QUOTED_RETURN_PATHS) }),
  originalMailFrom: fc.oneof({ weight: 1, arbitrary: fc.constant<QuotedReturnPath>('none') }, { weight: 1, arbitrary: fc.constantFrom(...QUOTED_RETURN_PATHS) }),
  header: fc.constantFrom(...EMAIL_EVIDENCE),
  messageId: fc.constantFrom(...EMAIL_EVIDENCE),
  redactTo: fc.boolean(),
  headersOnly: fc.boolean(),
  status: fc.constantFrom<DsnStatus>('dead', 'policy', 'delayed', 'delivered'),
  feedback: fc.constantFrom<FeedbackType>('abuse', 'fraud', 'virus', 'other', 'not-spam', 'auth-failure', 'none'),
  shoutFeedback: fc.boolean(),
});

/** How a report after the first relates to the one before it. */
export type Follow = 'same-copy' | 'other-copy' | 'any' | 'resent' | 'retried';

export interface RunShape {
  /** The scenario's IDN form (report-world.ts). */
  idn: boolean;
  first: ReportShape;
  then: { follow: Follow; report: ReportShape }[];
}

// Most reports of a sequence stay on the copy the one before was about, so that bounces,
// delays and complaints meet (docs/inbound.md, Several reports about one copy).
export const runShape: fc.Arbitrary<RunShape> = fc.record({
  idn: fc.boolean(),
  first: reportShape,
  then: fc.array(
    fc.record({
      follow: fc.oneof(
        { weight: 4, arbitrary: fc.constant<Follow>('same-copy') },
        { weight: 1, arbitrary: fc.constantFrom<Follow>('other-copy', 'any', 'resent', 'retried') },
      ),
      report: reportShape,
    }),
    { minLength: 0, maxLength: 2 },
  ),
});

/** The report shapes of a run in order, each later one placed as its `follow` says (retried: the previous one, sent again as is). */
export function reportsOf(run: RunShape): { shape: ReportShape; retried: boolean }[] {
  const out = [{ shape: run.first, retried: false }];
  for (const { follow, report } of run.then) {
    const prev = out[out.length - 1]!.shape;
    const shape: ReportShape =
      follow === 'resent' || follow === 'retried'
        ? prev
        : follow === 'same-copy'
          ? { ...report, anchor: prev.anchor }
          : follow === 'other-copy'
            ? { ...report, anchor: { ...prev.anchor, transaction: prev.anchor.transaction + 1 } }
            : report;
    out.push({ shape, retried: follow === 'retried' });
  }
  return out;
}

/** A report with every address and piece of evidence spelled out. */
export interface ConcreteReport {
  kind: 'dsn' | 'arf';
  rcptTo: string[];
  /** DSN: [Final-Recipient, Original-Recipient]; ARF: Original-Rcpt-To. */
  names: string[];
  /** DSN: a second recipient block's Final-Recipient ('' for a block without one), or null. */
  secondBlock: string | null;
  originalMailFrom: string | null;
  returnPath: string | null;
  header: string | null;
  messageId: string | null;
  redactTo: boolean;
  headersOnly: boolean;
  status: DsnStatus;
  feedback: FeedbackType;
  shoutFeedback: boolean;
  /** The copy whose bytes are quoted as the original (its evidence fields replaced). */
  base: Transaction;
}

const tagOf = (mailFrom: string) => /_([0-9a-f]{12})@/i.exec(mailFrom)?.[1] ?? null;
const hostOf = (address: string) => address.slice(address.lastIndexOf('@') + 1);
const localOf = (address: string) => address.slice(0, address.lastIndexOf('@'));

export function resolveReport(s: Scenario, shape: ReportShape): ConcreteReport {
  const emailOf = (team: number, index: number): ScenarioEmail => s.emails[team * 3 + (index % 3)]!;
  const anchorEmail = emailOf(shape.anchor.team, shape.anchor.email);
  const anchor = anchorEmail.transactions[shape.anchor.transaction % anchorEmail.transactions.length]!;
  const otherTeam = 1 - shape.anchor.team;
  const otherEmail = emailOf(shape.anchor.team, shape.anchor.email + 1);
  const otherTeamEmail = emailOf(otherTeam, shape.anchor.email);
  const otherTeamTx = otherTeamEmail.transactions[shape.anchor.transaction % otherTeamEmail.transactions.length]!;
  const sibling = anchorEmail.transactions.find((t) => t !== anchor) ?? otherEmail.transactions[0]!;
  const host = hostOf(anchor.mailFrom);
  const otherHost = hostOf(otherTeamTx.mailFrom);
  const madeUpTag = tagOf(anchor.mailFrom) === '0123456789ab' ? 'ba9876543210' : '0123456789ab';
  const untagged = anchor.mailFrom.replace(/_[0-9a-f]{12}@/i, '@');

  function returnPathFor(kind: QuotedReturnPath | TargetKind): string | null {
    switch (kind) {
      case 'anchor':
        return anchor.mailFrom;
      case 'anchor-lower':
        return anchor.mailFrom.toLowerCase();
      case 'anchor-upper':
        return anchor.mailFrom.toUpperCase();
      case 'sibling':
        return sibling.mailFrom;
      case 'other-email':
        return otherEmail.transactions[0]!.mailFrom;
      case 'other-team':
        return otherTeamTx.mailFrom;
      case 'untagged':
        return untagged;
      case 'plain':
        return `bounces@${host}`;
      case 'plain-other-team':
        return `bounces@${otherHost}`;
      case 'complaint':
        return COMPLAINT_ADDRESS;
      case 'wrong-tag':
        return anchor.mailFrom.replace(/_[0-9a-f]{12}@/i, `_${madeUpTag}@`);
      case 'unknown-token':
        return `bounces+em_Unknown${s.nonce}_${madeUpTag}@${host}`;
      case 'unknown-untagged':
        return `bounces+em_Unknown${s.nonce}@${host}`;
      case 'cross-token':
        return `${localOf(otherTeamTx.mailFrom)}@${host}`;
      case 'swapped-tag':
        return `bounces+${anchor.emailId}_${tagOf(otherEmail.transactions[0]!.mailFrom)}@${host}`;
      case 'no-mailbox':
        return `postmaster@${host}`;
      case 'none':
        return null;
    }
  }

  function emailIdFor(kind: EmailEvidence): ScenarioEmail | 'unknown' | null {
    return kind === 'anchor' ? anchorEmail : kind === 'other-email' ? otherEmail : kind === 'other-team' ? otherTeamEmail : kind === 'unknown' ? 'unknown' : null;
  }

  const co = anchorEmail.recipients.find((r) => !anchor.rcptTo.includes(r));
  function nameFor(kind: NameKind, i: number): string {
    const random = `stranger-${s.nonce}-${i}@example.com`;
    const xtext = (a: string) => (shape.kind === 'dsn' ? rfc6533(unicodeForm(a)) : unicodeForm(a));
    switch (kind) {
      case 'anchor':
        return anchor.rcptTo[0]!;
      case 'anchor-mate':
        return anchor.rcptTo[1] ?? anchor.rcptTo[0]!;
      case 'anchor-upper':
        return anchor.rcptTo[0]!.toUpperCase();
      case 'anchor-unicode':
        return unicodeForm(anchor.rcptTo[0]!);
      case 'anchor-xtext':
        return xtext(anchor.rcptTo[0]!);
      case 'mate-unicode':
        return unicodeForm(anchor.rcptTo[1] ?? anchor.rcptTo[0]!);
      case 'co':
        return co ?? random;
      case 'co-unicode':
        return co ? unicodeForm(co) : random;
      case 'co-xtext':
        return co ? xtext(co) : random;
      case 'same-team':
        return otherEmail.recipients[0]!;
      case 'other-team':
        return otherTeamTx.rcptTo[0]!;
      case 'random':
        return random;
      case 'redacted':
        return 'redacted@aol.com';
    }
  }

  const target = returnPathFor(shape.target)!;
  const header = emailIdFor(shape.header);
  const messageId = emailIdFor(shape.messageId);
  return {
    kind: shape.kind,
    rcptTo: shape.alsoComplaint && target !== COMPLAINT_ADDRESS ? [target, COMPLAINT_ADDRESS] : [target],
    names: shape.names.map(nameFor),
    secondBlock: shape.kind !== 'dsn' || shape.secondBlock === null ? null : shape.secondBlock === 'none' ? '' : nameFor(shape.secondBlock, 2),
    originalMailFrom: shape.kind === 'arf' ? returnPathFor(shape.originalMailFrom) : null,
    returnPath: returnPathFor(shape.returnPath),
    header: header === 'unknown' ? `em_Unknown${s.nonce}` : (header?.id ?? null),
    messageId: messageId === 'unknown' ? `<unknown-${s.nonce}@sender.dev>` : (messageId?.messageId ?? null),
    redactTo: shape.redactTo,
    headersOnly: shape.headersOnly,
    status: shape.status,
    feedback: shape.feedback,
    shoutFeedback: shape.shoutFeedback,
    base: anchor,
  };
}

/** An address with its domain in U-labels, upper-cased: `SOLO-R1@BÜCHER.EXAMPLE`. */
export function unicodeForm(address: string): string {
  const at = address.lastIndexOf('@');
  return `${address.slice(0, at)}@${domainToUnicode(address.slice(at + 1)) || address.slice(at + 1)}`.toUpperCase();
}

/** RFC 6533 3 utf-8-addr-xtext: each non-ASCII character (and `\`, `+`, `=`) as \x{HEX}. */
export function rfc6533(address: string): string {
  return [...address].map((c) => (/[\x21-\x2a\x2c-\x3c\x3e-\x5b\x5d-\x7e]/.test(c) ? c : `\\x{${c.codePointAt(0)!.toString(16).toUpperCase()}}`)).join('');
}

/** Text with non-ASCII characters as their UTF-8 bytes, one latin1 character each (the report is built as latin1). */
const utf8 = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
/** RFC 3464 2.3.2 / RFC 6533 3: an address with non-ASCII characters, or their \x{} escapes, is of type utf-8. */
const addressType = (address: string) => (/[^\x00-\x7f]|\\x\{/.test(address) ? 'utf-8' : 'rfc822');

/** The anchor copy with its evidence fields replaced as the report says (a folded field is one field). */
function original(r: ConcreteReport): string {
  const text = r.base.raw.toString('latin1');
  const head = headerBlock(text);
  const body = text.slice(head.length);
  const fields = head.split(/\r\n(?![ \t])/).filter((f) => !/^(return-path|x-posthorn-email-id|message-id):/i.test(f));
  const out = fields.map((f) => (r.redactTo && /^to:/i.test(f) ? 'To: redacted@aol.com' : f));
  if (r.header) out.unshift(`X-Posthorn-Email-ID: ${r.header}`);
  if (r.messageId) out.unshift(`Message-ID: ${r.messageId}`);
  if (r.returnPath) out.unshift(`Return-Path: <${r.returnPath}>`);
  return r.headersOnly ? out.join('\r\n') + '\r\n' : out.join('\r\n') + body;
}

const STATUS_LINES: Record<DsnStatus, { action: string; status: string; diagnostic: (rcpt: string) => string }> = {
  dead: { action: 'failed', status: '5.1.1', diagnostic: (r) => `smtp; 550 5.1.1 <${r}>: Recipient address rejected: User unknown in virtual mailbox table` },
  policy: { action: 'failed', status: '5.7.1', diagnostic: () => 'smtp; 554 5.7.1 Message rejected as spam by Content Filtering' },
  delayed: { action: 'delayed', status: '4.4.7', diagnostic: () => 'smtp; 400 4.4.7 Message delayed' },
  delivered: { action: 'delivered', status: '2.0.0', diagnostic: () => 'smtp; 250 2.0.0 Ok' },
};

/** The report's bytes: a multipart/report (RFC 6522) with a DSN or feedback part and the original. */
export function reportMessage(r: ConcreteReport, serial: number): Buffer {
  const boundary = `fuzz-${serial}-boundary`;
  const quoted = original(r);
  const originalPart = [`Content-Type: ${r.headersOnly ? 'text/rfc822-headers' : 'message/rfc822'}`, '', quoted].join('\r\n');
  let head: string[];
  let machine: string[];
  if (r.kind === 'dsn') {
    const st = STATUS_LINES[r.status];
    const [finalRecipient, originalRecipient] = r.names;
    head = ['From: MAILER-DAEMON@mx1.fuzz.test (Mail Delivery System)', 'Subject: Undelivered Mail Returned to Sender', 'Auto-Submitted: auto-replied', `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`];
    machine = [
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx1.fuzz.test',
      `Arrival-Date: Mon, 12 Jan 2026 10:15:01 +0000`,
      '',
      ...(finalRecipient ? [`Final-Recipient: ${addressType(finalRecipient)}; ${utf8(finalRecipient)}`] : []),
      ...(originalRecipient ? [`Original-Recipient: ${addressType(originalRecipient)};${utf8(originalRecipient)}`] : []),
      `Action: ${st.action}`,
      `Status: ${st.status}`,
      'Remote-MTA: dns; mailstore1.fuzz.test',
      `Diagnostic-Code: ${utf8(st.diagnostic(finalRecipient ?? 'unknown'))}`,
      ...(st.action === 'delayed' ? ['Will-Retry-Until: Thu, 15 Jan 2026 10:11:37 +0000'] : []),
      '',
      ...(r.secondBlock === null
        ? []
        : [
            ...(r.secondBlock ? [`Final-Recipient: ${addressType(r.secondBlock)}; ${utf8(r.secondBlock)}`] : []),
            `Action: ${st.action}`,
            `Status: ${st.status}`,
            `Diagnostic-Code: ${utf8(st.diagnostic(r.secondBlock || 'unknown'))}`,
            '',
          ]),
    ];
  } else {
    head = ['From: Feedback <feedback@arf.fuzz.test>', 'Subject: FW: abuse report', `Content-Type: multipart/report; report-type=feedback-report; boundary="${boundary}"`];
    machine = [
      'Content-Type: message/feedback-report',
      '',
      ...(r.feedback === 'none' ? [] : [`Feedback-Type: ${r.shoutFeedback ? r.feedback.toUpperCase() : r.feedback}`]),
      'User-Agent: Fuzz-Feedback/1.0',
      'Version: 1',
      ...(r.originalMailFrom ? [`Original-Mail-From: <${r.originalMailFrom}>`] : []),
      ...r.names.map((n) => `Original-Rcpt-To: <${utf8(n)}>`),
      'Arrival-Date: Mon, 12 Jan 2026 16:31:07 +0000',
      'Source-IP: 203.0.113.25',
      '',
    ];
  }
  const text = [
    ...head,
    `To: ${r.rcptTo[0]}`,
    'Date: Mon, 12 Jan 2026 16:40:11 +0000',
    `Message-ID: <report-${serial}@fuzz.test>`,
    'MIME-Version: 1.0',
    '',
    'This is a MIME-encapsulated message.',
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'A report about a message you sent.',
    '',
    `--${boundary}`,
    ...machine,
    `--${boundary}`,
    originalPart,
    `--${boundary}--`,
    '',
  ].join('\r\n');
  return Buffer.from(text, 'latin1');
}

/** A short description of a concrete report for failure messages. */
export function describeReport(r: ConcreteReport): string {
  const { base, ...rest } = r;
  return JSON.stringify({ ...rest, baseCopy: { emailId: base.emailId, team: base.team, mailFrom: base.mailFrom, rcptTo: base.rcptTo } });
}
