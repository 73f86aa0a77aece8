// The world the report fuzz (fuzz-reports.test.ts) forges reports against: two teams, each
// with three fresh emails per run, delivered to the sink, and every SMTP transaction that
// carried them (its return path, its recipients, the bytes the recipients got). In an IDN run
// the solo recipient, the Cc of the second email and the grouped recipients are at
// internationalised domains, which team 0 writes in U-labels and team 1 in upper-case A-labels
// (docs/outbound.md, Internationalised addresses: one domain however it is written).

import { domainToASCII } from 'node:url';
import type { MailWorld } from '../../helpers/mail-world.js';

/** The recipient domain a shaping rule groups two per transaction (docs/inbound.md: the domain tag). */
export const GROUPED_DOMAIN = 'grouped.test';
/** The same for IDN runs, in U-labels; the shaping rule and the DNS name it by its A-labels. */
export const GROUPED_IDN_DOMAIN = 'grüppe.test';
/** Every internationalised domain an IDN run mails. */
export const IDN_DOMAINS = ['bücher.example', 'münchen.example', GROUPED_IDN_DOMAIN];

/** A mailbox as docs/outbound.md compares it: lower-cased, the domain in A-labels. */
export function mailboxKey(address: string): string {
  const at = address.lastIndexOf('@');
  const domain = address.slice(at + 1).toLowerCase();
  return `${address.slice(0, at).toLowerCase()}@${domainToASCII(domain) || domain}`;
}

export interface ReportTeam {
  teamId: number;
  key: string;
  /** Sending domain; its return-path host is `bounces.<name>`. */
  domainName: string;
}

/** One SMTP transaction as the sink saw it. */
export interface Transaction {
  team: number;
  emailId: string;
  mailFrom: string;
  /** As mailboxKey spells them, as deliveries are compared (the sink's smtp-server hands IDN domains over in U-labels). */
  rcptTo: string[];
  raw: Buffer;
}

export interface ScenarioEmail {
  team: number;
  /** 0: one recipient; 1: To + Cc at two domains; 2: two at the grouped domain (one transaction) + Cc. */
  index: number;
  id: string;
  messageId: string;
  /** Every recipient, as mailboxKey spells it. */
  recipients: string[];
  /** The recipients as the send request wrote them. */
  sentAs: string[];
  transactions: Transaction[];
}

export interface Scenario {
  nonce: string;
  idn: boolean;
  teams: ReportTeam[];
  /** emails[team * 3 + index]. */
  emails: ScenarioEmail[];
}

/**
 * The recipients of one team's three emails; team 0's and team 1's first email go to the same
 * mailbox (in an IDN run written two ways).
 */
function plan(team: number, nonce: string, idn: boolean): { to: string[]; cc?: string[] }[] {
  const p = team === 0 ? 'a' : 'b';
  if (!idn) {
    return [
      { to: [`solo-${nonce}@example.net`] },
      { to: [`${p}-p1-${nonce}@example.org`], cc: [`${p}-p2-${nonce}@example.net`] },
      { to: [`${p}-g1-${nonce}@${GROUPED_DOMAIN}`, `${p}-g2-${nonce}@${GROUPED_DOMAIN}`], cc: [`${p}-g3-${nonce}@example.org`] },
    ];
  }
  const [books, munich, grouped] = IDN_DOMAINS as [string, string, string];
  // Team 0: U-labels in mixed case; team 1: A-labels in upper case.
  const d = team === 0 ? (name: string) => name.replace(/^./, (c) => c.toUpperCase()) : (name: string) => domainToASCII(name).toUpperCase();
  return [
    { to: [`${team === 0 ? 'Solo' : 'solo'}-${nonce}@${d(books)}`] },
    { to: [`${p}-p1-${nonce}@example.org`], cc: [`${p}-p2-${nonce}@${d(munich)}`] },
    { to: [`${p}-g1-${nonce}@${d(grouped)}`, `${p}-g2-${nonce}@${grouped.toUpperCase()}`], cc: [`${p}-g3-${nonce}@example.org`] },
  ];
}

/** Sends both teams' three emails, waits until every recipient is DELIVERED, and reads the transactions. */
export async function freshScenario(w: MailWorld, teams: ReportTeam[], nonce: string, idn: boolean): Promise<Scenario> {
  const before = w.sink.messages.length;
  const sent: { team: number; index: number; id: string; recipients: string[]; sentAs: string[] }[] = [];
  await Promise.all(
    teams.flatMap((team, ti) =>
      plan(ti, nonce, idn).map(async (r, index) => {
        const body = { from: `Fuzz <news@${team.domainName}>`, to: r.to, ...(r.cc ? { cc: r.cc } : {}), subject: `Report fuzz ${nonce} ${ti}/${index}`, text: 'Hello' };
        const res = await w.t0.request('POST', '/v1/emails', { body, key: team.key });
        if (res.status !== 200) throw new Error(`send failed: ${JSON.stringify(res.body)}`);
        const sentAs = [...r.to, ...(r.cc ?? [])];
        sent.push({ team: ti, index, id: res.body.emailId, recipients: sentAs.map(mailboxKey), sentAs });
      }),
    ),
  );
  for (let i = 0; ; i++) {
    await w.settle();
    const states = await Promise.all(sent.map((s) => w.t0.request('GET', `/v1/emails/${s.id}`, { key: teams[s.team]!.key })));
    if (states.every((r) => r.body.latestStatus === 'DELIVERED')) break;
    if (i > 1000) throw new Error(`not delivered: ${JSON.stringify(states.map((r) => r.body.latestStatus))}`);
    // No fixed sleep: settle() above waits for the engine; this only yields a turn between tries.
    await new Promise((r) => setImmediate(r));
  }
  const messages = w.sink.messages.slice(before);
  const emails: ScenarioEmail[] = [];
  for (const s of sent.sort((a, b) => a.team * 3 + a.index - (b.team * 3 + b.index))) {
    const transactions = messages
      .filter((m) => m.raw.toString('latin1').includes(s.id))
      .map((m) => ({ team: s.team, emailId: s.id, mailFrom: m.mailFrom, rcptTo: m.rcptTo.map(mailboxKey).sort(), raw: m.raw }))
      .sort((a, b) => (a.rcptTo[0]! < b.rcptTo[0]! ? -1 : 1));
    const carried = transactions.flatMap((t) => t.rcptTo).sort();
    if (JSON.stringify(carried) !== JSON.stringify([...s.recipients].sort())) throw new Error(`transactions of ${s.id} carried ${carried}, not ${s.recipients}`);
    const messageId = /^Message-ID:[ \t]*(<[^>\r\n]+>)/im.exec(headerBlock(transactions[0]!.raw.toString('latin1')))?.[1];
    if (!messageId) throw new Error(`no Message-ID in ${s.id}`);
    emails.push({ team: s.team, index: s.index, id: s.id, messageId, recipients: s.recipients, sentAs: s.sentAs, transactions });
  }
  return { nonce, idn, teams, emails };
}

export function headerBlock(text: string): string {
  const end = text.search(/\r?\n\r?\n/);
  return end < 0 ? text : text.slice(0, end);
}
