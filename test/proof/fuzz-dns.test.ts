import net from 'node:net';
import test from 'ava';
import fc from 'fast-check';
import { ManualClock } from '../../src/lib/clock.js';
import { createDnsClient, type DnsResolver } from '../../src/lib/dns/dns-client.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { publishRecords } from '../helpers/domain-fixtures.js';
import { sendAndDeliver, quotedHeaders, type DeliveredEmail } from '../inbound/helpers/inbound-world.js';
import { fixture, smtpSend } from '../inbound/helpers/smtp-client.js';
import { baseSeed, fcParams } from './helpers/fuzz-config.js';
import { ODD_NAMES, plan } from './helpers/dns-arbitraries.js';
import { answerProblem, watchProcess, type ProbeResponse } from './helpers/http-probe.js';
import { POISON_ADDRESS, POISON_TEXT, startHostileDns, type HostileDns, type Mutation } from './helpers/hostile-dns.js';
import { remoteMessage } from './helpers/inbound-message.js';

// Proof: Posthorn against a hostile or broken DNS resolver. Every lookup of a name under
// fuzz-dns.dev goes to a resolver (hostile-dns.ts) that takes the zone's correct answer and answers
// with what fast-check chose (dns-arbitraries.ts): spoofed answers (wrong id, question or type,
// carrying poison), garbage, answers cut short, compression pointer loops, counts larger than
// the records present, records of other types and names, CNAME chains and loops, hundreds of MX
// or TXT records, TTLs of 0, 2^31-1 and beyond, empty, binary and invalid UTF-8 TXT chunks, null
// MX, IP literals and absurd preferences as MX, odd A/AAAA (0.0.0.0, 127.x, multicast), garbage
// TLSA under the AD bit, every RCODE (extended ones too), TC and then garbage, a cut answer or a
// closed connection over TCP, and silence. Each batch sends mail to fresh domains there, verifies
// a fresh domain whose records are there, and receives mail (and a DSN) whose SPF, DKIM and
// DMARC are looked up there. After each batch, with the engine idle:
// - nothing crashed and nothing escaped as an unhandled rejection or exception; the API answers;
// - the verify and domain reads answer 2xx (or the spec's error body), never a 500;
// - inbound mail gets a 250 or a clean 5xx refusal, never a 4xx for a DNS answer;
// - every delivery is delivered, bounced only when the resolver gave an answer that is permanent
//   by mx-resolver.ts (NXDOMAIN, a null MX, NODATA with no address of the domain, NXDOMAIN for
//   the A and AAAA of every MX host), otherwise
//   queued with a retry time in the future; never left leased;
// - every stored reason, domain check and received message is text PostgreSQL and JSON carry;
// - no spoofed or out-of-name record was used: nobody asked for the poisoned name, connected to
//   the poisoned address or stored the poisoned text.
// Then the resolver answers correctly, the clock passes the retry times, and every deferred
// delivery reaches the world's sink: nothing lost.

const clock = new ManualClock(Date.UTC(2026, 5, 1, 8, 0, 0));
/** Per attempt, two attempts: a silent or garbled answer costs this twice. */
const DNS_TIMEOUT_MS = 300;
const FUZZ = 'fuzz-dns.dev';
const MAX_RESPONSE_CHARS = 2000;
const BATCHES = 25;

let w: MailWorld;
let hostile: HostileDns;
let via: DnsResolver | undefined;
let watch: ReturnType<typeof watchProcess>;
let poisonListener: net.Server;
const poisonConnections: string[] = [];
let delivered: DeliveredEmail;
let inboundPort: number;

interface Sent {
  emailId: string;
  fuzzed: string[];
  healthy: string;
}
const sent: Sent[] = [];
let serial = 0;

/** A resolver that goes through the hostile one once it is up (the world's setup uses the zone). */
function switchable(zoneResolver: DnsResolver): DnsResolver {
  const r = (): DnsResolver => via ?? zoneResolver;
  return {
    resolveTxt: (n) => r().resolveTxt(n),
    resolveMx: (n) => r().resolveMx(n),
    resolveCname: (n) => r().resolveCname(n),
    resolve4: (n) => r().resolve4(n),
    resolve6: (n) => r().resolve6(n),
    resolvePtr: (n) => r().resolvePtr!(n),
    resolveTlsa: (n) => r().resolveTlsa!(n),
  };
}

test.before(async () => {
  watch = watchProcess();
  w = await startMailWorld({ clock, resolver: switchable });
  hostile = await startHostileDns({ zonePort: w.zone.port, fuzzSuffix: FUZZ });
  via = createDnsClient({ servers: [hostile.server], timeoutMs: DNS_TIMEOUT_MS, tries: 2 });
  // Where a spoofed A record points: on the outbound port, so a connection there is seen.
  poisonListener = net.createServer((s) => {
    poisonConnections.push(`${s.remoteAddress}`);
    s.destroy();
  });
  await new Promise<void>((resolve) => poisonListener.listen(w.sink.port, POISON_ADDRESS, () => resolve()));
  // MX targets with odd octets in their names resolve, so only their names keep them from being used.
  for (const name of ODD_NAMES) w.zone.set(name, 'A', ['127.0.0.1'], 0);
  const res = await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { receiving: true } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  delivered = await sendAndDeliver(w, { to: 'alice@example.net' });
  inboundPort = w.t0.app.listeners.inbound!.port;
});
test.after.always(async () => {
  watch?.stop();
  await w?.close();
  await hostile?.close();
  await new Promise<void>((r) => (poisonListener ? poisonListener.close(() => r()) : r()));
});

/** Node 20 has String.prototype.isWellFormed; the compile target's lib does not name it yet. */
const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

function badText(value: unknown, path: string, out: string[] = []): string[] {
  if (typeof value === 'string') {
    if (!wellFormed(value)) out.push(`${path}: lone surrogate in ${JSON.stringify(value.slice(0, 80))}`);
    if (value.includes('\u0000')) out.push(`${path}: NUL in ${JSON.stringify(value.slice(0, 80))}`);
    if (value.includes(POISON_TEXT)) out.push(`${path}: a spoofed record's text was used: ${JSON.stringify(value.slice(0, 200))}`);
  } else if (Array.isArray(value)) value.forEach((v, i) => badText(v, `${path}[${i}]`, out));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) badText(v, `${path}.${k}`, out);
  return out;
}

/** RFC 5321 2.3.5 (and the underscore), as mx-resolver.ts takes an MX target. */
const HOST_NAME = /^(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

const PERMANENT = /domain does not exist \(NXDOMAIN\)|null MX \(RFC 7505\)|no MX records and no A\/AAAA records|no MX host exists/;

/** The resolver said something about this domain that mx-resolver.ts may take as permanent. */
function permanentAnswerSeen(domain: string, reason: string): boolean {
  const of = (type: string) => hostile.log.filter((q) => q.name === domain && q.type === type);
  if (/no MX host exists/.test(reason)) {
    // Each host's A and AAAA the reason names as NXDOMAIN was answered so.
    const named = [...reason.matchAll(/DNS (A|AAAA) (\S+): NOTFOUND/g)];
    return named.length > 0 && named.every(([, type, name]) => hostile.log.some((q) => q.name === name && q.type === type && q.verdict === 'nxdomain'));
  }
  if (/NXDOMAIN/.test(reason)) return of('MX').some((q) => q.verdict === 'nxdomain');
  if (/null MX/.test(reason)) return of('MX').some((q) => q.verdict === 'null-mx');
  const denied = (type: string) => of(type).some((q) => q.verdict === 'nxdomain' || q.verdict === 'nodata');
  return of('MX').some((q) => q.verdict === 'nodata') && denied('A') && denied('AAAA');
}

/**
 * Deliveries already reported: a retry in a later batch runs under that batch's plan, so the
 * whole world is checked every time, but a problem is reported once (shrinking then keeps the
 * batch that caused it; the domain names the batch, b<batch>-..., and its plan is in `plans`).
 */
const reported = new Set<string>();
const plans: string[] = [];

async function deliveryProblems(): Promise<string[]> {
  const found: string[] = [];
  const problems = { push: (...p: string[]) => found.push(...p) };
  const now = clock.nowMs();
  const rows = await w.t0.app.store.db.selectFrom('deliveries').selectAll().where('email_id', 'in', sent.map((s) => s.emailId)).execute();
  const byKey = new Map(rows.map((r) => [`${r.email_id} ${r.recipient}`, r]));
  for (const s of sent) {
    for (const rcpt of [...s.fuzzed, s.healthy]) {
      const where = `${s.emailId} ${rcpt}`;
      const r = byKey.get(where);
      if (!r) {
        problems.push(`${where}: no delivery row`);
        continue;
      }
      const said = `(${r.state}, ${r.last_code} ${JSON.stringify((r.last_response ?? '').slice(0, 300))})`;
      if (r.lease_owner !== null || r.lease_until !== null) problems.push(`${where}: still leased with the engine idle ${said}`);
      problems.push(...badText({ mx_host: r.mx_host, held_reason: r.held_reason }, where));
      if (r.mx_host !== null && !HOST_NAME.test(r.mx_host)) problems.push(`${where}: went through an MX that is no host name, ${JSON.stringify(r.mx_host)} ${said}`);
      if (r.last_response !== null) {
        problems.push(...badText(r.last_response, `${where} last_response`));
        if (r.last_response.length > MAX_RESPONSE_CHARS) problems.push(`${where}: last_response of ${r.last_response.length} characters`);
      }
      if (rcpt === s.healthy) {
        if (r.state !== 'delivered') problems.push(`${where}: the healthy domain's mail is not delivered ${said}`);
        continue;
      }
      const domain = rcpt.slice(rcpt.indexOf('@') + 1);
      if (r.state === 'bounced') {
        const reason = r.last_response ?? '';
        if (!PERMANENT.test(reason) || !permanentAnswerSeen(domain, reason)) {
          problems.push(`${where}: BOUNCED without a permanent answer ${said}; the resolver answered ${JSON.stringify(hostile.log.filter((q) => q.name.endsWith(domain)).slice(-12))}`);
        }
      } else if (r.state === 'queued') {
        if (r.next_attempt_at <= now) problems.push(`${where}: queued and due with the engine idle ${said}`);
      } else if (r.state !== 'delivered') {
        problems.push(`${where}: ${r.state} ${said}`);
      }
    }
  }
  const fresh = found.filter((p) => !reported.has(p.slice(0, p.indexOf(':'))));
  for (const p of fresh) reported.add(p.slice(0, p.indexOf(':')));
  return fresh.map((p) => {
    const batchOf = /@b(\d+)-/.exec(p)?.[1];
    return batchOf === undefined ? p : `${p}\n  (sent in batch ${batchOf}, plan ${plans[Number(batchOf)]?.slice(0, 1500)})`;
  });
}

async function commonProblems(): Promise<string[]> {
  const problems = await deliveryProblems();
  const health = await w.t0.request('GET', '/health');
  if (health.status !== 200) problems.push(`/health: ${health.status}`);
  // Each reported once, like the deliveries.
  const poisoned = hostile.poisonQueries.splice(0);
  if (poisoned.length) problems.push(`a spoofed or out-of-name record was used: queries for ${poisoned.slice(0, 5).join(', ')}`);
  const connected = poisonConnections.splice(0);
  if (connected.length) problems.push(`a spoofed address was connected to (${POISON_ADDRESS}), ${connected.length} time(s)`);
  problems.push(...watch.problems.splice(0));
  return problems;
}

function asProbe(res: { status: number; headers: Headers; body: unknown }): ProbeResponse {
  return { status: res.status, headers: Object.fromEntries(res.headers.entries()), text: typeof res.body === 'string' ? res.body : JSON.stringify(res.body ?? ''), json: typeof res.body === 'string' ? undefined : res.body };
}

interface Batch {
  plan: Mutation[];
  signed: boolean;
  emails: number[];
  verify: boolean;
  inbound: 'none' | 'receive' | 'dsn';
  advanceMs: number;
}

const batch: fc.Arbitrary<Batch> = fc.record({
  plan,
  signed: fc.boolean(),
  emails: fc.array(fc.integer({ min: 1, max: 2 }), { minLength: 1, maxLength: 2 }),
  verify: fc.boolean(),
  inbound: fc.constantFrom('none' as const, 'receive' as const, 'receive' as const, 'dsn' as const),
  advanceMs: fc.constantFrom(0, 2 * 60_000, 20 * 60_000, 3_600_000),
});

const describe = (b: Batch): string => JSON.stringify(b, (_k, v: unknown) => (Array.isArray(v) && v.length > 40 && typeof v[0] === 'number' ? `${v.length} bytes` : v));

async function runBatch(b: Batch, n: number): Promise<string[]> {
  const problems: string[] = [];
  plans[n] = describe(b);
  hostile.setPlan(b.plan, { signed: b.signed });
  clock.advance(b.advanceMs);
  // Mail to fresh domains under the hostile resolver; their records live 0 s, so each retry asks again.
  for (const [i, count] of b.emails.entries()) {
    const fuzzed = Array.from({ length: count }, (_, j) => `r${j}@b${n}-${i}-${j}.${FUZZ}`);
    for (const rcpt of fuzzed) {
      const domain = rcpt.slice(rcpt.indexOf('@') + 1);
      w.zone.set(domain, 'MX', [{ exchange: `mx.${domain}`, priority: 10 }], 0);
      w.zone.set(`mx.${domain}`, 'A', ['127.0.0.1'], 0);
    }
    const healthy = `ok-${serial++}@example.net`;
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: [...fuzzed, healthy], subject: `fuzz ${n}` }) });
    if (res.status !== 200) problems.push(`send: ${res.status} ${JSON.stringify(res.body)}`);
    else sent.push({ emailId: res.body.emailId as string, fuzzed, healthy });
  }
  const mine = sent.slice(sent.length - b.emails.length);
  if (b.verify) {
    const created = await w.t0.request('POST', '/v1/domains', { body: { name: `v${n}.${FUZZ}`, region: 'local' } });
    if (created.status !== 200) problems.push(`domain create: ${created.status} ${JSON.stringify(created.body)}`);
    else {
      publishRecords(w.t0, created.body);
      const verify = await w.t0.request('PUT', `/v1/domains/${created.body.id}/verify`);
      const got = await w.t0.request('GET', `/v1/domains/${created.body.id}`);
      for (const [what, res] of [['PUT verify', verify], ['GET', got]] as const) {
        const p = answerProblem(asProbe(res), true);
        if (p) problems.push(`${what} /v1/domains/${created.body.id}: ${p}`);
        problems.push(...badText(res.body, `${what} domain ${created.body.id}`));
      }
      if (got.status === 200 && !['SUCCESS', 'PENDING', 'FAILED', 'TEMPORARY_FAILURE', 'NOT_STARTED'].includes(got.body.status)) problems.push(`domain status ${JSON.stringify(got.body.status)}`);
    }
  }
  if (b.inbound === 'receive') {
    const from = `s${n}.${FUZZ}`;
    const raw = await remoteMessage(w.zone, from, 'inbox@sender.dev');
    const res = await smtpSend({ port: inboundPort, from: `someone@${from}`, to: ['inbox@sender.dev'], raw });
    if (!res.ok && !(res.responseCode !== undefined && res.responseCode >= 500)) problems.push(`inbound mail from ${from}: ${res.responseCode} ${res.response}`);
  } else if (b.inbound === 'dsn') {
    const dsn = fixture('exchange-dsn-delayed.eml', { RETURN_PATH: delivered.returnPath, RECIPIENT: 'alice@example.net', MESSAGE_ID: delivered.messageId, SUBJECT: delivered.subject, ORIGINAL_HEADERS: quotedHeaders(delivered.raw) });
    const res = await smtpSend({ port: inboundPort, from: '', to: [delivered.returnPath], raw: dsn });
    if (!res.ok) problems.push(`DSN: ${res.responseCode} ${res.response}`);
  }
  await w.settle();
  if (b.inbound === 'receive') {
    const list = await w.t0.request('GET', '/v1/receivedEmails?limit=5');
    const p = answerProblem(asProbe(list), true);
    if (p) problems.push(`GET /v1/receivedEmails: ${p}`);
    problems.push(...badText(list.body, 'receivedEmails'));
  }
  // The batch's emails as the API and the store show them: the MX host and the reply of every event.
  for (const s of mine) {
    const email = await w.t0.request('GET', `/v1/emails/${s.emailId}`);
    const p = answerProblem(asProbe(email), true);
    if (p) problems.push(`GET /v1/emails/${s.emailId}: ${p}`);
    problems.push(...badText(email.body, `email ${s.emailId}`));
  }
  const events = await w.t0.app.store.db.selectFrom('email_events').select(['email_id', 'status', 'data_json']).where('email_id', 'in', sent.map((s) => s.emailId)).execute();
  for (const e of events) problems.push(...badText(e.data_json, `${e.email_id} ${e.status} event`));
  problems.push(...(await commonProblems()));
  return [...new Set(problems)];
}

test.serial('a hostile resolver: no crash, no 500, no 4xx to inbound mail, every delivery in a legal state with valid text, no spoofed record used', async (t) => {
  const stats = { batches: 0 };
  let n = 0;
  const property = fc.asyncProperty(batch.map((b) => Object.assign(b, { [fc.toStringMethod]: () => describe(b) })), async (b) => {
    const problems = await runBatch(b, n++);
    stats.batches++;
    if (problems.length) throw new Error(problems.slice(0, 10).join('\n'));
  });
  const details = await fc.check(property, fcParams('dns hostile', BATCHES));
  const error = (details.errorInstance as Error | undefined)?.message ?? '';
  t.false(details.failed, `seed ${details.seed}, path "${details.counterexamplePath}": ${error.slice(0, 6000)}\n${details.counterexample ? describe(details.counterexample[0] as Batch) : ''}`);
  const rows = await w.t0.app.store.db.selectFrom('deliveries').select(['state']).where('rcpt_domain', 'like', `%.${FUZZ}`).execute();
  const count = (s: string) => rows.filter((r) => r.state === s).length;
  const kinds = new Map<string, number>();
  const types = new Map<string, number>();
  for (const q of hostile.log) kinds.set(q.mutation, (kinds.get(q.mutation) ?? 0) + 1);
  for (const q of hostile.log) if (q.name.endsWith(FUZZ)) types.set(q.type, (types.get(q.type) ?? 0) + 1);
  t.log(
    `base seed ${baseSeed()}: ${stats.batches} batches, ${sent.length} emails, ${hostile.log.length} queries (${[...kinds].map(([k, v]) => `${k} ${v}`).join(', ')}; fuzzed ones by type: ${[...types].map(([k, v]) => `${k} ${v}`).join(', ')}); fuzzed deliveries: ${count('delivered')} delivered, ${count('bounced')} bounced, ${count('queued')} deferred`,
  );
});

test.serial('after the fuzz a correct resolver gets every deferred message delivered once the retry time passes: nothing lost', async (t) => {
  hostile.setPlan([{ kind: 'pass' }]);
  const queued = async () => (await w.t0.app.store.db.selectFrom('deliveries').select('id').where('rcpt_domain', 'like', `%.${FUZZ}`).where('state', '=', 'queued').execute()).length;
  // Retries come due, and answers cached from the fuzz (a day at most, mx-resolver.ts) expire, within this many hours.
  for (let hour = 0; hour < 30 && (await queued()) > 0; hour++) {
    clock.advance(3_600_000);
    await w.settle();
  }
  t.is(await queued(), 0, 'nothing left deferred');
  t.deepEqual(await commonProblems(), []);
  const rows = await w.t0.app.store.db.selectFrom('deliveries').select(['email_id', 'recipient', 'state']).where('rcpt_domain', 'like', `%.${FUZZ}`).execute();
  t.true(rows.length > 0);
  for (const r of rows) {
    t.true(r.state === 'delivered' || r.state === 'bounced', `${r.email_id} ${r.recipient}: ${r.state}`);
    if (r.state === 'delivered') t.true(w.sink.messages.some((m) => m.rcptTo.includes(r.recipient)), `${r.recipient}: the sink has it`);
  }
});
