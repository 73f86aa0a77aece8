// What a report must do, read from docs/inbound.md ("Bounces", "Which recipients a report may
// change", "Complaints", "Several reports about one copy") and docs/outbound.md
// ("Internationalised addresses"), and nothing of Posthorn's code: it knows the scenario only as
// the sink saw it (each transaction's return path and recipients) and the API told it (ids,
// Message-IDs), and what the run's earlier reports did (History).
//
// - RCPT: the complaint address, plain bounces@ and a return path whose token names an email of
//   that return-path domain (with a tag, the tag of one of its transactions) are accepted; any
//   other token, a wrong tag and any other mailbox at a return-path host are refused 550 5.1.1.
// - Linking, most reliable first: the VERP token of the address it came to; a return path the
//   report quotes (ARF Original-Mail-From, then the original's Return-Path); our
//   X-Posthorn-Email-ID; the Message-ID. A report that came only to return paths stays within
//   those domains (the team that owns them); an ARF at the complaint address may link any team's
//   email. A DSN acts only when it came to a return path.
// - Coverage: a tagged return path (sent to or quoted) covers the recipients its transaction
//   carried; evidence every copy carries (an untagged token, our header, the Message-ID) covers
//   an email with one recipient only.
// - The recipient: a covered one the report names; naming another recipient of the email
//   changes nothing; naming nobody of the email (rewritten, redacted, absent) means the covered
//   recipient when there is exactly one. A mailbox is one however it is written: any case, its
//   domain in U-labels or A-labels, a DSN's utf-8 address with RFC 6533 \x{HEX} escapes.
// - Effects: a failed 5.1.1 bounces the delivery and suppresses (HARD_BOUNCE); a failed 5.7.1
//   bounces without suppressing; delayed records DELIVERY_DELAYED only; a success notice nothing.
//   abuse, fraud, virus, other and a missing Feedback-Type (any case): COMPLAINED and a COMPLAINT
//   suppression; not-spam and auth-failure nothing.
// - Only news: a copy bounces once and the bounce is final (a failed or delayed block about a
//   bounced copy records nothing); a recipient complains about an email once. A report that
//   records nothing suppresses nothing; an address already suppressed keeps its first reason.
// - The same bytes from the same sender to the same recipients again (a retry) are taken once:
//   250, no second report, nothing recorded.

import { COMPLAINT_ADDRESS, type ConcreteReport } from './report-arbitraries.js';
import { mailboxKey, type Scenario, type ScenarioEmail, type Transaction } from './report-world.js';

export type EventStatus = 'BOUNCED' | 'DELIVERY_DELAYED' | 'COMPLAINED';

export interface Effect {
  team: number;
  emailId: string;
  recipient: string;
  event: EventStatus;
  /** The delivery's state afterwards. */
  delivery: 'delivered' | 'bounced';
  /** The suppression this effect asks for (the address keeps an earlier one's reason). */
  suppression: 'HARD_BOUNCE' | 'COMPLAINT' | null;
}

/** What the run's reports have recorded so far: the effects in order, and the suppressions with their first reason. */
export class History {
  readonly effects: Effect[] = [];
  readonly suppressions = new Map<string, { team: number; recipient: string; reason: 'HARD_BOUNCE' | 'COMPLAINT' }>();

  has(event: EventStatus, emailId: string, recipient: string): boolean {
    return this.effects.some((e) => e.event === event && e.emailId === emailId && e.recipient === recipient);
  }

  /** Records a report's effects; returns the suppressions they added (not those already there). */
  record(effects: Effect[]): { team: number; recipient: string }[] {
    const added: { team: number; recipient: string }[] = [];
    for (const e of effects) {
      this.effects.push(e);
      const key = `${e.team}|${e.recipient}`;
      if (e.suppression && !this.suppressions.has(key)) {
        this.suppressions.set(key, { team: e.team, recipient: e.recipient, reason: e.suppression });
        added.push({ team: e.team, recipient: e.recipient });
      }
    }
    return added;
  }

  bounced(emailId: string, recipient: string): boolean {
    return this.has('BOUNCED', emailId, recipient);
  }
}

/** RFC 6533 3: `\x{HEX}` in a utf-8 address is that character. */
function unescaped(address: string): string {
  return address.replace(/\\x\{([0-9A-Fa-f]{1,6})\}/g, (_, hex: string) => String.fromCodePoint(parseInt(hex, 16)));
}

/** A name as a report gives it, as the mailbox it names (lower-cased, A-labels). */
export function namedMailbox(name: string): string {
  return name.includes('@') ? mailboxKey(unescaped(name)) : name.toLowerCase();
}

const COMPLAINT_TYPES = ['abuse', 'fraud', 'virus', 'other', 'none'];

export interface Expectation {
  accepted: string[];
  refused: string[];
  /** In the order the report gives them (a DSN's recipient blocks). */
  effects: Effect[];
  /** The email the report is linked to and the recipients its evidence covers, when it acts. */
  scope: { team: number; emailId: string; covered: string[]; by: string } | null;
  /** How the oracle got there, for failure messages. */
  why: string[];
}

/** What a return path names: an email and the recipients of one transaction, or the email alone. */
type ReturnPathMeaning =
  | { kind: 'refused' }
  | { kind: 'plain'; team: number }
  | { kind: 'token'; team: number; email: ScenarioEmail; transaction: Transaction | null }
  | { kind: 'not-ours' };

export function returnPathMeaning(s: Scenario, address: string): ReturnPathMeaning {
  const at = address.lastIndexOf('@');
  const local = address.slice(0, at);
  const host = address.slice(at + 1).toLowerCase();
  const team = s.teams.findIndex((t) => `bounces.${t.domainName}` === host);
  if (team < 0) return { kind: 'not-ours' };
  const m = /^bounces(?:\+(.+))?$/i.exec(local);
  if (!m) return { kind: 'refused' };
  if (!m[1]) return { kind: 'plain', team };
  const tagged = /^(.+)_([0-9a-f]{12})$/i.exec(m[1]);
  const id = tagged ? tagged[1]! : m[1];
  // Ids are matched regardless of case (an MTA may change it); the scenario's never collide.
  const email = s.emails.find((e) => e.team === team && e.id.toLowerCase() === id.toLowerCase());
  if (!email) return { kind: 'refused' };
  if (!tagged) return { kind: 'token', team, email, transaction: null };
  const tag = tagged[2]!.toLowerCase();
  const transaction = email.transactions.find((t) => /_([0-9a-f]{12})@/i.exec(t.mailFrom)![1]!.toLowerCase() === tag);
  return transaction ? { kind: 'token', team, email, transaction } : { kind: 'refused' };
}

export function expectedOutcome(s: Scenario, r: ConcreteReport, history: History): Expectation {
  const why: string[] = [];
  const accepted: string[] = [];
  const refused: string[] = [];
  const routes: ReturnPathMeaning[] = [];
  let atComplaint = false;
  for (const rcpt of r.rcptTo) {
    if (rcpt.toLowerCase() === COMPLAINT_ADDRESS) {
      accepted.push(rcpt);
      atComplaint = true;
      continue;
    }
    const meaning = returnPathMeaning(s, rcpt);
    if (meaning.kind === 'refused' || meaning.kind === 'not-ours') {
      refused.push(rcpt);
      continue;
    }
    accepted.push(rcpt);
    routes.push(meaning);
  }
  let scope: Expectation['scope'] = null;
  const none = (reason: string): Expectation => ({ accepted, refused, effects: [], scope, why: [...why, reason] });
  if (!accepted.length) return none('every recipient refused: nothing sent');
  const toReturnPath = routes.length > 0;
  if (r.kind === 'dsn' && !toReturnPath) return none('a DSN only at the complaint address is kept, not applied');

  // The email, and the recipients the evidence covers (null: every copy's evidence).
  let linked: { email: ScenarioEmail; transaction: Transaction | null; by: string } | null = null;
  const viaToken = routes.find((m): m is Extract<ReturnPathMeaning, { kind: 'token' }> => m.kind === 'token');
  if (viaToken) linked = { email: viaToken.email, transaction: viaToken.transaction, by: 'the token it came to' };
  else {
    const anyTeam = atComplaint && r.kind === 'arf';
    const teams = new Set(routes.map((m) => (m as { team: number }).team));
    const allowed = (e: ScenarioEmail) => anyTeam || teams.has(e.team);
    why.push(anyTeam ? 'an ARF at the complaint address: any team' : `came to return paths of team(s) ${[...teams]}: those only`);
    for (const quoted of [r.originalMailFrom, r.returnPath]) {
      if (linked || !quoted) continue;
      const m = returnPathMeaning(s, quoted);
      if (m.kind === 'token' && allowed(m.email)) linked = { email: m.email, transaction: m.transaction, by: `the quoted return path ${quoted}` };
    }
    const byHeader = r.header ? s.emails.find((e) => e.id === r.header) : undefined;
    if (!linked && byHeader && allowed(byHeader)) linked = { email: byHeader, transaction: null, by: 'X-Posthorn-Email-ID' };
    const byMessageId = r.messageId ? s.emails.find((e) => e.messageId === r.messageId) : undefined;
    if (!linked && byMessageId && allowed(byMessageId)) linked = { email: byMessageId, transaction: null, by: 'Message-ID' };
  }
  if (!linked) return none('linked to no email of the scenario');
  const { email } = linked;
  const covered = linked.transaction ? linked.transaction.rcptTo : email.recipients.length === 1 ? email.recipients : [];
  scope = { team: email.team, emailId: email.id, covered, by: linked.by.startsWith('the quoted') ? 'quoted return path' : linked.by };
  why.push(`linked to ${email.id} (team ${email.team}) by ${linked.by}; covers [${covered}]`);

  /** The covered recipient a block or report names, or (without an @) why none. */
  const recipientOf = (named: string[]): string => {
    const names = named.map(namedMailbox);
    const hit = names.find((n) => covered.includes(n));
    if (hit) return hit;
    if (names.some((n) => email.recipients.includes(n))) return 'names another recipient of the email';
    if (covered.length !== 1) return 'names no covered recipient, and not exactly one is covered';
    return covered[0]!;
  };
  const effects: Effect[] = [];
  /** Whether the history so far, with this report's effects before this one, already has it. */
  const recorded = (event: EventStatus, recipient: string) => history.has(event, email.id, recipient) || effects.some((e) => e.event === event && e.recipient === recipient);
  const add = (named: string[], event: EventStatus, make: () => Omit<Effect, 'team' | 'emailId' | 'recipient' | 'event'>) => {
    const recipient = recipientOf(named);
    if (!recipient.includes('@')) return why.push(recipient);
    // A copy bounces once and the bounce is final; a recipient complains about an email once.
    if (event !== 'COMPLAINED' && recorded('BOUNCED', recipient)) return why.push(`${recipient}: its copy has bounced, nothing recorded`);
    if (event === 'COMPLAINED' && recorded('COMPLAINED', recipient)) return why.push(`${recipient} has complained about it already, nothing recorded`);
    why.push(`the recipient is ${recipient}`);
    effects.push({ team: email.team, emailId: email.id, recipient, event, ...make() });
  };
  if (r.kind === 'dsn') {
    // one recipient block: Final-Recipient and Original-Recipient; a second block on its own
    const blocks = [r.names.slice(0, 2), ...(r.secondBlock === null ? [] : [r.secondBlock ? [r.secondBlock] : []])];
    for (const named of blocks) {
      if (r.status === 'dead') add(named, 'BOUNCED', () => ({ delivery: 'bounced', suppression: 'HARD_BOUNCE' }));
      else if (r.status === 'policy') add(named, 'BOUNCED', () => ({ delivery: 'bounced', suppression: null }));
      else if (r.status === 'delayed') add(named, 'DELIVERY_DELAYED', () => ({ delivery: 'delivered', suppression: null }));
      else why.push('a success notice');
    }
  } else if (!COMPLAINT_TYPES.includes(r.feedback)) why.push(`${r.feedback} feedback is only kept`);
  else add(r.names, 'COMPLAINED', () => ({ delivery: 'delivered', suppression: 'COMPLAINT' }));
  return { accepted, refused, why, scope, effects };
}
