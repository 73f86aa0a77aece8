import { Writable } from 'node:stream';
import { domainToASCII } from 'node:url';
import test from 'ava';
import fc from 'fast-check';
import { pino } from 'pino';
import type { BusEvent } from '../../src/core/events.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { repositoriesOf } from '../helpers/repositories.js';
import { twoTeams } from '../helpers/two-teams.js';
import { collectEvents } from '../inbound/helpers/inbound-world.js';
import { smtpSend, type SendResult } from '../inbound/helpers/smtp-client.js';
import { baseSeed, fcParams, runsFor } from './helpers/fuzz-config.js';
import { watchProcess } from './helpers/http-probe.js';
import { describeReport, reportMessage, reportsOf, resolveReport, runShape, type ConcreteReport, type ReportShape, type RunShape } from './helpers/report-arbitraries.js';
import { expectedOutcome, History, namedMailbox, type Effect, type EventStatus, type Expectation } from './helpers/report-oracle.js';
import { freshScenario, GROUPED_DOMAIN, GROUPED_IDN_DOMAIN, IDN_DOMAINS, type ReportTeam, type Scenario } from './helpers/report-world.js';

// Bounces (RFC 3464 DSNs) and complaints (RFC 5965 ARF) are unauthenticated: every recipient
// of an email sees its return path, Message-ID and To/Cc. fast-check forges reports against two
// teams' freshly delivered email (one recipient; To + Cc at two domains; two recipients grouped
// in one transaction by a shaping rule, with a Cc), in half the runs at internationalised
// domains, written in U-labels by one team and A-labels by the other: sent to a copy's return
// path, a co-recipient's, the other team's, plain bounces@, the complaint address or a forged
// one (wrong tag, unknown token, the other team's token at this host); naming the covered
// recipient (as the envelope had it, upper-cased, its domain in U-labels, RFC 6533-escaped), a
// co-recipient, the other team's, a stranger or nobody; quoting one copy's evidence or
// another's. A run sends up to three reports in a row, most about the copy the one before was
// about (a delay then a bounce, a bounce then a complaint, the same bounce resent or retried,
// another copy of the same email). An oracle written from docs/inbound.md (report-oracle.ts)
// says exactly what each report changes, given what the ones before it did: which delivery gets
// which event and which recipient is suppressed in which team, and the run checks it both ways
// through the API and the store after each report: what must change did, and nothing else did
// (no other team, no recipient the evidence does not cover, nothing twice). Every RCPT gets what
// the docs say (550 5.1.1 for a forged return path), every accepted report 250 and a row in
// inbound_reports (a retry: none), no reply is a local error, nothing is logged as an error,
// nothing escapes unhandled.

const RUNS = 96;
const STATUSES: EventStatus[] = ['BOUNCED', 'DELIVERY_DELAYED', 'COMPLAINED'];
const BUS_TYPES: Record<EventStatus, string> = { BOUNCED: 'email.bounced', DELIVERY_DELAYED: 'email.delivery_delayed', COMPLAINED: 'email.complained' };

let w: MailWorld;
let teams: ReportTeam[];
let busEvents: BusEvent[];
let watch: ReturnType<typeof watchProcess>;
const errorLines: string[] = [];

test.before(async () => {
  watch = watchProcess();
  const logger = pino({ level: 'error' }, new Writable({ write: (chunk: Buffer, _enc, done) => (errorLines.push(chunk.toString('utf8')), done()) }));
  const groupedIdn = domainToASCII(GROUPED_IDN_DOMAIN);
  const shaping = [GROUPED_DOMAIN, groupedIdn].map((domain) => ({ domain, maxRecipientsPerTransaction: 2 }));
  w = await startMailWorld({ logger, overrides: { outbound: { shaping } as never } });
  w.addRecipientDomain(GROUPED_DOMAIN);
  for (const d of IDN_DOMAINS) w.addRecipientDomain(domainToASCII(d));
  const { a, b } = await twoTeams(w.t0, { b: { domains: ['rival.dev'] } });
  teams = [
    { teamId: a.teamId, key: a.key, domainName: w.domain.name },
    { teamId: b.teamId, key: b.key, domainName: b.domains[0]!.name },
  ];
  busEvents = collectEvents(w, Object.values(BUS_TYPES));
});
test.after.always(async () => {
  watch?.stop();
  await w?.close();
});

/** One observable change: an event on an email, a delivery's state, a suppression in a team. */
interface Change {
  team: number;
  recipient: string;
  what: string;
}

/** Every change the reports made to the scenario, read back through the API and the store. */
async function observe(s: Scenario, extraAddresses: string[]): Promise<Change[]> {
  const changes: Change[] = [];
  const repos = repositoriesOf(w.t0.app);
  for (const e of s.emails) {
    const got = await w.t0.request('GET', `/v1/emails/${e.id}`, { key: s.teams[e.team]!.key });
    if (got.status !== 200) throw new Error(`GET ${e.id}: ${got.status}`);
    for (const ev of got.body.emailEvents as { status: string; data?: { recipient?: string } }[]) {
      if (STATUSES.includes(ev.status as EventStatus)) changes.push({ team: e.team, recipient: String(ev.data?.recipient).toLowerCase(), what: `${ev.status} event on ${e.id}` });
    }
    for (const row of await repos.deliveries.listForEmail(e.id)) {
      if (row.state !== 'delivered') changes.push({ team: e.team, recipient: row.recipient.toLowerCase(), what: `delivery of ${e.id} ${row.state}` });
    }
  }
  const addresses = new Set([...s.emails.flatMap((e) => e.recipients), ...extraAddresses.map(namedMailbox)]);
  for (const [ti, team] of s.teams.entries()) {
    for (const address of addresses) {
      const row = await repos.suppressions.get(team.teamId, address);
      if (row) changes.push({ team: ti, recipient: address, what: `suppressed ${row.reason}` });
    }
  }
  return changes;
}

/** The state the docs give after the run's reports so far: every event, each bounced delivery, each suppression with its first reason. */
function expectedChanges(h: History): Change[] {
  const bounced = new Map(h.effects.filter((e) => e.event === 'BOUNCED').map((e) => [`${e.emailId}|${e.recipient}`, e]));
  return [
    ...h.effects.map((e) => ({ team: e.team, recipient: e.recipient, what: `${e.event} event on ${e.emailId}` })),
    ...[...bounced.values()].map((e) => ({ team: e.team, recipient: e.recipient, what: `delivery of ${e.emailId} bounced` })),
    ...[...h.suppressions.values()].map((x) => ({ team: x.team, recipient: x.recipient, what: `suppressed ${x.reason}` })),
  ];
}

const key = (c: Change) => `${c.team}|${c.recipient}|${c.what}`;

/**
 * Counts over the whole store (every run's email, not only this scenario's): report events,
 * bounced deliveries, and each team's suppressions. A report reaching mail outside the
 * scenario shows in their change.
 */
async function storeTotals(): Promise<number[]> {
  const db = w.t0.app.store.db;
  const events = await db.selectFrom('email_events').select((eb) => eb.fn.countAll().as('n')).where('status', 'in', STATUSES).executeTakeFirstOrThrow();
  const bounced = await db.selectFrom('deliveries').select((eb) => eb.fn.countAll().as('n')).where('state', '=', 'bounced').executeTakeFirstOrThrow();
  const suppressed = await Promise.all(teams.map((t) => db.selectFrom('suppressions').select((eb) => eb.fn.countAll().as('n')).where('team_id', '=', t.teamId).executeTakeFirstOrThrow()));
  return [events, bounced, ...suppressed].map((r) => Number(r.n));
}

/** How much one report grows the store's totals: its events, the deliveries it bounces (each once), the suppressions it adds. */
function expectedTotals(effects: Effect[], added: { team: number }[]): number[] {
  return [effects.length, effects.filter((e) => e.event === 'BOUNCED').length, ...teams.map((_, ti) => added.filter((a) => a.team === ti).length)];
}

interface StepCheck {
  x: Expectation;
  history: History;
  added: { team: number; recipient: string }[];
  retried: boolean;
  res: SendResult;
  observed: Change[];
  bus: BusEvent[];
  stored: { before: number; after: { id: number; rcpt_to_json: string } | undefined };
  totals: number[];
}

/** What is wrong with the outcome of one report, each problem labelled with the rule it breaks. */
function problems({ x, history, added, retried, res, observed, bus, stored, totals }: StepCheck): string[] {
  const out: string[] = [];
  const wantTotals = expectedTotals(x.effects, added);
  if (JSON.stringify(totals) !== JSON.stringify(wantTotals)) out.push(`over the whole store, [events, bounced deliveries, suppressions per team] grew by ${JSON.stringify(totals)}, the docs give ${JSON.stringify(wantTotals)}`);
  const lower = (l: string[]) => l.map((a) => a.toLowerCase()).sort();
  // (3) refusals exactly where the docs say, with 550 5.1.1
  if (JSON.stringify(lower(res.rejected)) !== JSON.stringify(lower(x.refused))) out.push(`RCPT: refused ${JSON.stringify(res.rejected)}, the docs refuse ${JSON.stringify(x.refused)}`);
  for (const e of res.rcptErrors) if (!/^550 5\.1\.1 /.test(e)) out.push(`RCPT: a refusal is not 550 5.1.1: ${e}`);
  // (4) accepted: 250 and kept (a retry: kept once); (5) never a local error
  if (/4\.3\.0|^451|^5\d\d 5\.3\./.test(res.response)) out.push(`a local error: ${res.response}`);
  const newRow = !!stored.after && stored.after.id > stored.before;
  if (x.accepted.length) {
    if (!res.ok || !/^250 /.test(res.response)) out.push(`accepted recipients ${JSON.stringify(x.accepted)} but the message got ${res.response}`);
    if (retried && newRow) out.push('a retried report was stored a second time');
    else if (!retried && !newRow) out.push('accepted, but no new row in inbound_reports');
    else if (newRow && JSON.stringify(lower(JSON.parse(stored.after!.rcpt_to_json))) !== JSON.stringify(lower(x.accepted))) out.push(`inbound_reports row for ${stored.after!.rcpt_to_json}, accepted ${JSON.stringify(x.accepted)}`);
  } else {
    if (res.ok) out.push(`every recipient should be refused, the message got ${res.response}`);
    if (newRow) out.push('nothing accepted, yet a report was stored');
  }
  // (1), (2) and the exact effect of the reports so far: as many events as the oracle gives,
  // one delivery state and one suppression per recipient
  const count = (l: Change[]) => {
    const m = new Map<string, number>();
    for (const c of l) m.set(key(c), c.what.includes(' event on ') ? (m.get(key(c)) ?? 0) + 1 : 1);
    return m;
  };
  const expected = expectedChanges(history);
  const want = count(expected);
  const got = count(observed);
  for (const [k, n] of got) if (want.has(k) && want.get(k) !== n) out.push(`${n} times, the docs give it ${want.get(k)} times: ${k}`);
  for (const c of observed) {
    if (want.has(key(c))) continue;
    const rule = !x.scope
      ? 'changed something though the docs give this report no effect'
      : c.team !== x.scope.team
        ? 'INVARIANT 1: changed the OTHER team'
        : !x.scope.covered.includes(c.recipient)
          ? 'INVARIANT 2: changed a recipient the evidence does not cover'
          : 'changed a covered recipient the docs leave alone';
    out.push(`${rule}: team ${c.team} ${c.recipient}: ${c.what}`);
  }
  for (const c of expected) if (!got.has(key(c))) out.push(`MISSING: team ${c.team} ${c.recipient}: ${c.what}`);
  // the webhook events match this report's recorded ones
  const busWant = x.effects.map((e) => `${BUS_TYPES[e.event]}|${e.emailId}|${e.recipient}`);
  const busGot = bus.map((e) => `${e.type}|${e.data.id}|${String(e.data.recipient).toLowerCase()}`);
  if (JSON.stringify(busGot) !== JSON.stringify(busWant)) out.push(`bus events ${JSON.stringify(busGot)}, expected ${JSON.stringify(busWant)}`);
  return out;
}

const stats = {
  runs: 0,
  idnRuns: 0,
  reports: 0,
  retried: 0,
  refusedAll: 0,
  acted: 0,
  noEffect: 0,
  notNews: 0,
  byEvent: {} as Record<string, number>,
  linkedOtherTeam: 0,
  grouped: 0,
  linkedBy: {} as Record<string, number>,
};
let reportSerial = 0;

async function runOne(run: RunShape, serial: number): Promise<void> {
  const s = await freshScenario(w, teams, `r${serial}`, run.idn);
  stats.runs++;
  if (run.idn) stats.idnRuns++;
  const history = new History();
  const names: string[] = [];
  const done: string[] = [];
  let previous: { report: ConcreteReport; raw: Buffer; x: Expectation } | null = null;
  for (const [step, { shape, retried }] of reportsOf(run).entries()) {
    const report: ConcreteReport = retried ? previous!.report : resolveReport(s, shape);
    const x: Expectation = retried ? { ...previous!.x, effects: [], why: ['the same message again (a retry): taken once, nothing recorded'] } : expectedOutcome(s, report, history);
    const raw: Buffer = retried ? previous!.raw : reportMessage(report, ++reportSerial);
    names.push(...report.names, ...(report.secondBlock ? [report.secondBlock] : []));
    const [before] = await w.t0.app.inbound.reportsRepo.latest(1);
    const totalsBefore = await storeTotals();
    const busBefore = busEvents.length;
    const res = await smtpSend({ port: w.t0.app.listeners.inbound!.port, from: report.kind === 'dsn' ? '' : 'feedback@arf.fuzz.test', to: report.rcptTo, raw });
    const added = history.record(x.effects);
    const [after] = await w.t0.app.inbound.reportsRepo.latest(1);
    const observed = await observe(s, names);
    const totals = (await storeTotals()).map((n, i) => n - totalsBefore[i]!);
    const stored = { before: Number(before?.id ?? 0), after: after && { id: Number(after.id), rcpt_to_json: after.rcpt_to_json } };
    const bad = problems({ x, history, added, retried, res, observed, bus: busEvents.slice(busBefore), stored, totals });
    stats.reports++;
    if (retried) stats.retried++;
    if (x.scope) stats.linkedBy[x.scope.by] = (stats.linkedBy[x.scope.by] ?? 0) + 1;
    if (x.why.some((y) => y.endsWith('nothing recorded'))) stats.notNews++;
    if (!x.accepted.length) stats.refusedAll++;
    else if (x.effects.length) {
      stats.acted++;
      for (const e of x.effects) stats.byEvent[e.event] = (stats.byEvent[e.event] ?? 0) + 1;
      if (x.effects[0]!.team !== shape.anchor.team) stats.linkedOtherTeam++;
      if (x.scope && x.scope.covered.length > 1) stats.grouped++;
    } else stats.noEffect++;
    const described = `${retried ? 'retried: ' : ''}${describeReport(report)}`;
    if (bad.length) {
      throw new Error(
        `report ${step + 1} of the run${run.idn ? ' (IDN scenario)' : ''}:\n${bad.join('\n')}\n  reply: ${res.response} ${JSON.stringify(res.rcptErrors)}\n  oracle: ${x.why.join('; ')}\n  report: ${described}\n  observed: ${JSON.stringify(observed)}` +
          (done.length ? `\n  earlier reports:\n${done.map((d, i) => `    ${i + 1}. ${d}`).join('\n')}` : ''),
      );
    }
    done.push(`${described}\n       oracle: ${x.why.join('; ')}`);
    previous = { report, raw, x };
  }
}

// Always run, whatever the seed: the cases the docs spell out.
const anchorShape = (over: Partial<ReportShape>): ReportShape => ({
  kind: 'dsn',
  anchor: { team: 0, email: 1, transaction: 0 },
  target: 'anchor',
  alsoComplaint: false,
  names: ['anchor'],
  secondBlock: null,
  returnPath: 'none',
  originalMailFrom: 'none',
  header: 'anchor',
  messageId: 'anchor',
  redactTo: false,
  headersOnly: false,
  status: 'dead',
  feedback: 'abuse',
  shoutFeedback: false,
  ...over,
});
const one = (shape: ReportShape, idn = false): RunShape => ({ idn, first: shape, then: [] });
const complaint = (over: Partial<ReportShape> = {}) => anchorShape({ kind: 'arf', target: 'complaint', originalMailFrom: 'anchor', ...over });
const EXAMPLES: [RunShape][] = [
  [one(anchorShape({}))], // a genuine dead-mailbox DSN bounces and suppresses its recipient
  [one(anchorShape({ names: ['co'] }))], // naming the co-recipient changes nothing
  [one(complaint())], // a genuine complaint
  [one(complaint({ originalMailFrom: 'sibling' }))], // a co-recipient's complaint about the anchor
  [one(anchorShape({ anchor: { team: 1, email: 2, transaction: 0 }, names: ['anchor-mate'] }))], // the domain tag covers both grouped recipients
  [one(anchorShape({ target: 'plain', header: 'other-team', messageId: 'other-team', anchor: { team: 0, email: 0, transaction: 0 } }))], // team A's bounces@ cannot reach team B
  [one(anchorShape({ target: 'cross-token' }))], // the other team's token at this host: 550 5.1.1
  [one(anchorShape({ kind: 'arf', target: 'complaint', names: ['anchor'] }))], // our header cannot act on a two-recipient email
  [one(anchorShape({ target: 'untagged', anchor: { team: 1, email: 0, transaction: 0 }, names: ['redacted'] }))], // an untagged token covers a one-recipient email
  [one(complaint({ feedback: 'auth-failure' }))], // an authentication failure report is no complaint
  [one(complaint({ feedback: 'none' }))], // a report without Feedback-Type is a complaint
  [one(anchorShape({ secondBlock: 'anchor-upper' }))], // two failed blocks about one copy bounce it once
  // several reports about one copy
  [{ idn: false, first: anchorShape({ status: 'delayed' }), then: [{ follow: 'same-copy', report: anchorShape({}) }] }], // a delay, then the bounce
  [{ idn: false, first: anchorShape({}), then: [{ follow: 'same-copy', report: anchorShape({ status: 'delayed' }) }] }], // a delay after the bounce: nothing
  [{ idn: false, first: anchorShape({}), then: [{ follow: 'resent', report: anchorShape({}) }] }], // the same bounce as a new message: nothing
  [{ idn: false, first: anchorShape({}), then: [{ follow: 'retried', report: anchorShape({}) }] }], // the same bytes again: taken once
  [{ idn: false, first: anchorShape({ status: 'policy' }), then: [{ follow: 'same-copy', report: complaint() }] }], // a bounce, then a complaint
  [{ idn: false, first: complaint(), then: [{ follow: 'same-copy', report: anchorShape({}) }, { follow: 'same-copy', report: complaint({ feedback: 'fraud' }) }] }], // a complaint, a bounce, a second complaint
  [{ idn: false, first: anchorShape({ status: 'delayed' }), then: [{ follow: 'other-copy', report: anchorShape({}) }, { follow: 'other-copy', report: anchorShape({ status: 'delayed' }) }] }], // two copies interleaved
  // internationalised domains: the other form of the same mailbox
  [one(anchorShape({ anchor: { team: 1, email: 2, transaction: 0 }, names: ['mate-unicode'] }), true)], // the grouped mate named in U-labels (team 1 sent A-labels)
  [one(anchorShape({ anchor: { team: 0, email: 2, transaction: 0 }, names: ['anchor-mate'] }), true)], // named in A-labels (team 0 sent U-labels)
  [one(anchorShape({ anchor: { team: 1, email: 2, transaction: 0 }, names: ['anchor-xtext'] }), true)], // RFC 6533 escapes
  [one(anchorShape({ anchor: { team: 0, email: 1, transaction: 0 }, names: ['co-xtext'] }), true)], // the co-recipient, escaped: another recipient, nothing
  [one(complaint({ anchor: { team: 0, email: 1, transaction: 1 }, names: ['anchor-unicode'] }), true)], // a complaint naming the U-label form
];

test.serial('forged and genuine DSN and ARF reports change exactly what their evidence covers, in its own team only', async (t) => {
  // ~0.2 s a run alone, up to several times that in a loaded full run (one test: ava's idle timeout would cut it)
  t.timeout(60_000 + runsFor(RUNS) * 2_000);
  let serial = 0;
  const property = fc.asyncProperty(runShape, async (run) => runOne(run, ++serial));
  const details = await fc.check(property, { ...fcParams('inbound reports', RUNS), examples: EXAMPLES });
  const error = (details.errorInstance as Error | undefined)?.message ?? '';
  t.false(details.failed, `seed ${details.seed}, path "${details.counterexamplePath}", counterexample ${JSON.stringify(details.counterexample)}:\n${error.slice(0, 6000)}`);
  t.log(`base seed ${baseSeed()}: ${JSON.stringify(stats)}`);
  t.deepEqual(errorLines, [], 'nothing logged as an error');
  t.deepEqual(watch.problems, [], 'no unhandled rejection or exception');
  t.is((await w.t0.request('GET', '/health')).status, 200);
});
