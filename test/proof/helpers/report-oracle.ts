// What a report must do, read from docs/inbound.md ("Bounces", "Which recipients a report may
// change", "Complaints") and nothing of Posthorn's code: it knows the scenario only as the sink
// saw it (each transaction's return path and recipients) and the API told it (ids, Message-IDs).
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
//   recipient when there is exactly one.
// - Effects: a failed 5.1.1 bounces the delivery and suppresses (HARD_BOUNCE); a failed 5.7.1
//   bounces without suppressing; delayed records DELIVERY_DELAYED only; a success notice nothing.
//   abuse, fraud, virus, other: COMPLAINED and a COMPLAINT suppression; not-spam nothing.

import { COMPLAINT_ADDRESS, type ConcreteReport } from './report-arbitraries.js';
import type { Scenario, ScenarioEmail, Transaction } from './report-world.js';

export type EventStatus = 'BOUNCED' | 'DELIVERY_DELAYED' | 'COMPLAINED';

export interface Effect {
  team: number;
  emailId: string;
  recipient: string;
  event: EventStatus;
  /** The delivery's state afterwards. */
  delivery: 'delivered' | 'bounced';
  suppression: 'HARD_BOUNCE' | 'COMPLAINT' | null;
}

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

export function expectedOutcome(s: Scenario, r: ConcreteReport): Expectation {
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
    const names = named.map((n) => n.toLowerCase());
    const hit = names.find((n) => covered.includes(n));
    if (hit) return hit;
    if (names.some((n) => email.recipients.includes(n))) return 'names another recipient of the email';
    if (covered.length !== 1) return 'names no covered recipient, and not exactly one is covered';
    return covered[0]!;
  };
  const effects: Effect[] = [];
  const add = (named: string[], make: (recipient: string) => Omit<Effect, 'team' | 'emailId' | 'recipient'>) => {
    const recipient = recipientOf(named);
    if (!recipient.includes('@')) return why.push(recipient);
    why.push(`the recipient is ${recipient}`);
    effects.push({ team: email.team, emailId: email.id, recipient, ...make(recipient) });
  };
  if (r.kind === 'dsn') {
    // one recipient block: Final-Recipient and Original-Recipient; a second block on its own
    const blocks = [r.names.slice(0, 2), ...(r.secondBlock === null ? [] : [r.secondBlock ? [r.secondBlock] : []])];
    for (const named of blocks) {
      if (r.status === 'dead') add(named, () => ({ event: 'BOUNCED', delivery: 'bounced', suppression: 'HARD_BOUNCE' }));
      else if (r.status === 'policy') add(named, () => ({ event: 'BOUNCED', delivery: 'bounced', suppression: null }));
      else if (r.status === 'delayed') add(named, () => ({ event: 'DELIVERY_DELAYED', delivery: 'delivered', suppression: null }));
      else why.push('a success notice');
    }
  } else if (r.feedback === 'not-spam') why.push('not-spam feedback is only kept');
  else add(r.names, () => ({ event: 'COMPLAINED', delivery: 'delivered', suppression: 'COMPLAINT' }));
  return { accepted, refused, why, scope, effects };
}
