import test from 'ava';
import fc from 'fast-check';
import { ManualClock } from '../../src/lib/clock.js';
import { classifyReply } from '../../src/smtp/outbound/classify-reply.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { baseSeed, fcParams } from './helpers/fuzz-config.js';
import { watchProcess } from './helpers/http-probe.js';
import { startHostileMx, type HostileMx, type ReplyRead, type SessionScript, type Transaction } from './helpers/hostile-mx.js';
import { sessionScript, wellBehavedScript } from './helpers/mx-arbitraries.js';

// Proof: Posthorn's outbound SMTP client against a hostile remote MX. fast-check writes each
// session's behaviour (hostile-mx.ts, mx-arbitraries.ts): at every stage a generated reply of any
// class, multi-line with consistent or inconsistent codes and '-' misused, odd capability lists
// (SIZE below the message, SIZE garbage, PIPELINING, no 8BITMIME, SMTPUTF8, AUTH, STARTTLS then
// real TLS or garbage), non-numeric and out-of-range codes, no text, bare LF, over-long lines,
// NUL and 8-bit bytes, unsolicited replies, replies split across writes or dripped, and the
// connection dropped before the greeting, halfway through a reply, mid-DATA or right after the
// final 250. Each batch sends mail through the API to recipients at the hostile domain and one at
// a healthy domain, runs delivery on the injected clock, and checks after the engine is idle:
// - nothing crashed (no unhandled rejection or uncaught exception) and the API answers;
// - every delivery is in a legal state: delivered only where the MX accepted that recipient and
//   answered 250 to the end of its data (when the session was out of step, the MX at least saw
//   the recipient), bounced only for a 5xx the classifier calls permanent (or the client's own
//   SIZE refusal), otherwise queued with a retry time in the future, never leased;
// - every stored response is text PostgreSQL and JSON carry: no NUL, no lone surrogate, at most
//   2,000 characters, and the email, its events and the operator's trace read back without error;
// - a message the MX accepted (in step, its 250 written whole) is never sent to it again;
// - the healthy domain's mail is delivered every time.
// Then a well-behaved MX takes the hostile domain's place, the clock passes the retry times, and
// every deferred delivery is delivered: nothing lost.

const clock = new ManualClock(Date.UTC(2026, 5, 1, 8, 0, 0));
/** Small, so sessions that stall cost little; large enough that a session that does not stall never meets it. */
const TIMEOUT_MS = 2500;
const TRANSACTION_TIMEOUT_MS = 10_000;
const HOSTILE_ADDRESS = '127.0.0.3';
const HOSTILE_NAME = 'mx.hostile.test';
const HOSTILE_DOMAIN = 'hostile.example';
/** What Posthorn keeps of a reply (core/deliveries/delivery-service.ts). */
const MAX_RESPONSE_CHARS = 2000;
const BATCHES = 60;

let w: MailWorld;
let mx: HostileMx;
let hooks: WebhookReceiver;
let watch: ReturnType<typeof watchProcess>;
let op: string;

interface Sent {
  emailId: string;
  hostile: string[];
  healthy: string;
}
const sent: Sent[] = [];
let serial = 0;

test.before(async () => {
  watch = watchProcess();
  w = await startMailWorld({
    clock,
    overrides: { outbound: { greetingTimeoutMs: TIMEOUT_MS, socketTimeoutMs: TIMEOUT_MS, transactionTimeoutMs: TRANSACTION_TIMEOUT_MS }, webhooks: { allowPrivate: true, timeoutMs: 5000 } },
  });
  // Its own loopback address on the (global) outbound port.
  mx = await startHostileMx({ host: HOSTILE_ADDRESS, port: w.sink.port, name: HOSTILE_NAME });
  w.zone.set(HOSTILE_NAME, 'A', [HOSTILE_ADDRESS]);
  w.zone.set(HOSTILE_DOMAIN, 'MX', [{ exchange: HOSTILE_NAME, priority: 10 }]);
  hooks = await startWebhookReceiver();
  const hook = await w.t0.request('POST', '/v1/webhooks', { body: { url: hooks.url, eventTypes: ['email.sent', 'email.delivery_delayed', 'email.delivered', 'email.failed', 'email.bounced'] } });
  if (hook.status !== 200) throw new Error(JSON.stringify(hook.body));
  op = (await w.t0.app.services.operatorKeys.create('fuzz')).token;
});
test.after.always(async () => {
  watch?.stop();
  mx?.dropAll();
  await w?.close();
  await mx?.close();
  await hooks?.close();
});

/** Node 20 has String.prototype.isWellFormed; the compile target's lib does not name it yet. */
const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Strings anywhere in a value that PostgreSQL text or a JSON reader would choke on, by path. */
function badText(value: unknown, path: string, allowNul: boolean, out: string[] = []): string[] {
  if (typeof value === 'string') {
    if (!wellFormed(value)) out.push(`${path}: lone surrogate in ${JSON.stringify(value.slice(0, 80))}`);
    if (!allowNul && value.includes('\u0000')) out.push(`${path}: NUL in ${JSON.stringify(value.slice(0, 80))}`);
  } else if (Array.isArray(value)) value.forEach((v, i) => badText(v, `${path}[${i}]`, allowNul, out));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) badText(v, `${path}.${k}`, allowNul, out);
  return out;
}

const txnsFor = (emailId: string, rcpt: string): Transaction[] => mx.transactions.filter((t) => t.emailId === emailId && t.rcpts.some((r) => r.address === rcpt));
/**
 * Also the email's transactions that ended at MAIL FROM: no RCPT names the recipient (the VERP
 * tag does, but only Posthorn can read it), so any of them may have been this recipient's.
 */
const txnsMaybeFor = (emailId: string, rcpt: string): Transaction[] => mx.transactions.filter((t) => t.emailId === emailId && (t.rcpts.length === 0 || t.rcpts.some((r) => r.address === rcpt)));
const rcptReply = (t: Transaction, rcpt: string): ReplyRead | null => t.rcpts.find((r) => r.address === rcpt)?.reply ?? null;

/** The MX accepted the message for this recipient, and the client read every reply as the MX meant it. */
function acceptedInStep(t: Transaction, rcpt: string): boolean {
  return t.inStep && !!t.mail?.positive && !!rcptReply(t, rcpt)?.positive && !!t.data?.positive && t.ended && !!t.eod?.positive && t.eod.whole;
}

/** A reply of this transaction the classifier calls permanent for this recipient, with this code. */
function permanentReplyIn(t: Transaction, rcpt: string, code: number): boolean {
  const replies = [t.mail, rcptReply(t, rcpt), t.data, t.eod].filter((r): r is ReplyRead => !!r);
  return replies.some((r) => {
    const lines = r.text.split(/\r?\n/).filter((l) => l !== '');
    const c = Number(/^\d+/.exec(r.text)?.[0]);
    return c === code && classifyReply(c, lines.join('\n'), { mailFrom: t.mailFrom }).kind === 'bounced';
  });
}

/** The MX's log of the sessions that carried an email, compact. */
function sessionsOf(emailId: string): string {
  const ids = new Set(mx.transactions.filter((x) => x.emailId === emailId).map((x) => x.session));
  const short = (r: ReplyRead | null) => r && `${r.text.length > 60 ? `${r.text.slice(0, 60)}...(${r.text.length})` : r.text}${r.clean ? '' : ' [not clean]'}`;
  return JSON.stringify(
    [...ids].map((id) => ({
      session: id,
      outOfStep: [...mx.sessions[id]!.recipientsOutOfStep],
      transactions: mx.sessions[id]!.transactions.map((x) => ({ email: x.emailId, mail: short(x.mail), rcpts: x.rcpts.map((r) => [r.address, short(r.reply)]), data: short(x.data), ended: x.ended, eod: short(x.eod), inStep: x.inStep })),
    })),
  ).slice(0, 6000);
}

/** SIZE (RFC 1870) and SMTPUTF8 (RFC 6531) refusals the client makes itself, before MAIL FROM. */
const LOCAL_REFUSAL = /Message size larger than allowed|does not offer SMTPUTF8/;

/**
 * Deliveries that reached their final state in a batch with a session out of step. Out of step,
 * the MX may have written replies ahead of commands it had not read (and then closed): the
 * client can finish a transaction, of any email of the batch on that session, from replies the
 * MX meant for other lines, and the MX never sees its commands. Such an outcome cannot be
 * checked against the MX's log, only for being a legal state.
 */
const settledOutOfStep = new Map<string, boolean>();

async function problemsNow(checkApiFor: readonly Sent[], batchOutOfStep = false): Promise<string[]> {
  const problems: string[] = [];
  const now = clock.nowMs();
  const ids = sent.map((s) => s.emailId);
  const rows = await w.t0.app.store.db.selectFrom('deliveries').selectAll().where('email_id', 'in', ids).execute();
  const byKey = new Map(rows.map((r) => [`${r.email_id} ${r.recipient}`, r]));
  for (const s of sent) {
    for (const rcpt of [...s.hostile, s.healthy]) {
      const r = byKey.get(`${s.emailId} ${rcpt}`);
      const where = `${s.emailId} ${rcpt}`;
      if (!r) {
        problems.push(`${where}: no delivery row`);
        continue;
      }
      if (r.lease_owner !== null || r.lease_until !== null) problems.push(`${where}: still leased (${r.lease_owner}) with the engine idle`);
      if (r.last_response !== null) {
        problems.push(...badText(r.last_response, `${where} last_response`, false));
        if (r.last_response.length > MAX_RESPONSE_CHARS) problems.push(`${where}: last_response of ${r.last_response.length} characters`);
      }
      const said = `(${r.state}, ${r.last_code} ${JSON.stringify((r.last_response ?? '').slice(0, 160))})`;
      if (rcpt === s.healthy) {
        if (r.state !== 'delivered') problems.push(`${where}: the healthy domain's mail is not delivered ${said}`);
        if (!w.sink.messages.some((m) => m.rcptTo.includes(rcpt))) problems.push(`${where}: the sink never got the healthy domain's mail`);
        continue;
      }
      const txns = txnsFor(s.emailId, rcpt);
      // Settled in a batch with a session out of step (see settledOutOfStep), or a session saw this
      // recipient, or carried this email, once out of step (its replies no longer mapped onto commands).
      const key = `${s.emailId} ${rcpt}`;
      if (r.state !== 'queued' && !settledOutOfStep.has(key)) settledOutOfStep.set(key, batchOutOfStep);
      const outOfStep = settledOutOfStep.get(key) === true || mx.sessions.some((x) => x.recipientsOutOfStep.has(rcpt) || (!x.inStep && x.transactions.some((y) => y.emailId === s.emailId)));
      if (r.state === 'delivered') {
        if (!txns.some((t) => acceptedInStep(t, rcpt)) && !outOfStep) problems.push(`${where}: DELIVERED, but the MX never accepted it ${said}; the email's sessions at the MX: ${sessionsOf(s.emailId)}`);
      } else if (r.state === 'bounced') {
        const code = r.last_code ?? 0;
        const maybe = txnsMaybeFor(s.emailId, rcpt);
        const legal = code >= 500 && code <= 599 && (maybe.some((t) => permanentReplyIn(t, rcpt, code)) || LOCAL_REFUSAL.test(r.last_response ?? '') || outOfStep);
        if (!legal) problems.push(`${where}: BOUNCED without a permanent reply ${said}; MX saw ${JSON.stringify(maybe)}`);
      } else if (r.state === 'queued') {
        if (r.next_attempt_at <= now) problems.push(`${where}: queued and due with the engine idle ${said}`);
      } else {
        problems.push(`${where}: ${r.state} ${said}`);
      }
      // Accepted in step: the client read that 250, so the MX must never see this message for this recipient again.
      const first = txns.findIndex((t) => acceptedInStep(t, rcpt));
      if (first >= 0 && first < txns.length - 1) problems.push(`${where}: sent again after the MX accepted it (${txns.length - first - 1} more transaction(s)) ${said}`);
    }
  }
  for (const s of checkApiFor) {
    const email = await w.t0.request('GET', `/v1/emails/${s.emailId}`);
    if (email.status !== 200) problems.push(`GET /v1/emails/${s.emailId}: ${email.status} ${JSON.stringify(email.body).slice(0, 300)}`);
    else problems.push(...badText(email.body, `email ${s.emailId}`, false));
    const trace = await w.t0.request('GET', `/admin/v1/emails/${s.emailId}/trace`, { key: op });
    if (trace.status !== 200) problems.push(`GET /admin/v1/emails/${s.emailId}/trace: ${trace.status} ${JSON.stringify(trace.body).slice(0, 300)}`);
    // A transcript shows the server's bytes as they came (a NUL is "\u0000" in the JSON): well-formed is what it owes.
    else problems.push(...badText(trace.body, `trace ${s.emailId}`, true));
  }
  const health = await w.t0.request('GET', '/health');
  if (health.status !== 200) problems.push(`/health: ${health.status}`);
  problems.push(...watch.problems);
  return problems;
}

const BODIES = {
  small: 'Hi there',
  '8bit': 'Gr\u00fc\u00dfe, caf\u00e9 \u2709 \u{1F600}\n'.repeat(20),
  large: 'A line of a longer message, long enough to pass a small SIZE.\n'.repeat(400),
} as const;

interface Batch {
  scripts: SessionScript[];
  emails: { hostile: number; body: keyof typeof BODIES }[];
  /** The clock moves on first, so earlier deferred mail meets this batch's MX too. */
  advanceMs: number;
}

const batch: fc.Arbitrary<Batch> = fc.record({
  scripts: fc.array(sessionScript, { minLength: 1, maxLength: 3 }),
  emails: fc.array(fc.record({ hostile: fc.integer({ min: 1, max: 3 }), body: fc.constantFrom<keyof typeof BODIES>('small', '8bit', 'large') }), { minLength: 1, maxLength: 2 }),
  advanceMs: fc.constantFrom(0, 0, 0, 2 * 60_000, 20 * 60_000, 3_600_000),
});

function describe(b: Batch): string {
  const shown = (spec: unknown): unknown =>
    spec && typeof spec === 'object' && 'bytes' in spec ? { ...(spec as object), bytes: (spec as { bytes: Buffer }).bytes.length > 300 ? `${(spec as { bytes: Buffer }).bytes.length} bytes: ${(spec as { bytes: Buffer }).bytes.subarray(0, 120).toString('latin1')}...` : (spec as { bytes: Buffer }).bytes.toString('latin1') } : spec;
  return JSON.stringify({
    ...b,
    scripts: b.scripts.map((s) => Object.fromEntries(Object.entries(s).map(([k, v]) => [k, Array.isArray(v) ? v.map(shown) : shown(v)]))),
  });
}

test.serial('a hostile MX: no crash, every delivery in a legal state with valid text, nothing accepted sent twice, the healthy domain unaffected', async (t) => {
  const stats = { batches: 0, emails: 0 };
  const property = fc.asyncProperty(batch.map((b) => Object.assign(b, { [fc.toStringMethod]: () => describe(b) })), async (b) => {
    mx.setScripts(b.scripts);
    const sessionsBefore = mx.sessions.length;
    clock.advance(b.advanceMs);
    const mine: Sent[] = [];
    for (const e of b.emails) {
      const n = serial++;
      const hostile = Array.from({ length: e.hostile }, (_, i) => `r${n}-${i}@${HOSTILE_DOMAIN}`);
      const healthy = `ok-${n}@example.net`;
      const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: [...hostile, healthy], subject: `fuzz ${n}`, text: BODIES[e.body] }) });
      if (res.status !== 200) throw new Error(`send: ${res.status} ${JSON.stringify(res.body)}`);
      const s = { emailId: res.body.emailId as string, hostile, healthy };
      sent.push(s);
      mine.push(s);
    }
    await w.settle();
    stats.batches++;
    stats.emails += mine.length;
    const problems = await problemsNow(mine, mx.sessions.slice(sessionsBefore).some((x) => !x.inStep));
    if (problems.length) throw new Error(problems.slice(0, 12).join('\n'));
  });
  const details = await fc.check(property, fcParams('mx hostile', BATCHES));
  const error = (details.errorInstance as Error | undefined)?.message ?? '';
  t.false(details.failed, `seed ${details.seed}, path "${details.counterexamplePath}": ${error.slice(0, 6000)}`);
  const rows = await w.t0.app.store.db.selectFrom('deliveries').select(['state']).where('rcpt_domain', '=', HOSTILE_DOMAIN).execute();
  const count = (s: string) => rows.filter((r) => r.state === s).length;
  t.log(
    `base seed ${baseSeed()}: ${stats.batches} batches, ${stats.emails} emails, ${mx.sessions.length} hostile sessions (${mx.sessions.filter((s) => !s.inStep).length} out of step), ${mx.transactions.length} transactions, ${mx.transactions.filter((x) => x.ended).length} ended DATA; hostile deliveries: ${count('delivered')} delivered, ${count('bounced')} bounced, ${count('queued')} deferred`,
  );
});

test.serial('after the fuzz a well-behaved MX gets every deferred message once the retry time passes: nothing lost', async (t) => {
  mx.setScripts([wellBehavedScript()]);
  const queued = async () => (await w.t0.app.store.db.selectFrom('deliveries').select('id').where('rcpt_domain', '=', HOSTILE_DOMAIN).where('state', '=', 'queued').execute()).length;
  // Retries (and "try again in N" hints, at most a day) come due within this many hours.
  for (let hour = 0; hour < 30 && (await queued()) > 0; hour++) {
    clock.advance(3_600_000);
    await w.settle();
  }
  t.is(await queued(), 0, 'nothing left deferred');
  const problems = await problemsNow([]);
  t.deepEqual(problems, []);
  const rows = await w.t0.app.store.db.selectFrom('deliveries').select(['email_id', 'recipient', 'state']).where('rcpt_domain', '=', HOSTILE_DOMAIN).execute();
  t.true(rows.length > 0);
  for (const r of rows) t.true(r.state === 'delivered' || r.state === 'bounced', `${r.email_id} ${r.recipient}: ${r.state}`);
  // Every email delivered to somebody got its email.delivered webhook, and every webhook body is valid text.
  await w.t0.app.webhookDispatcher.whenIdle();
  for (const id of new Set(rows.filter((r) => r.state === 'delivered').map((r) => r.email_id))) {
    t.true(hooks.calls.some((c) => c.json?.type === 'email.delivered' && c.json.data.id === id), `${id}: email.delivered webhook`);
  }
  t.deepEqual(hooks.calls.flatMap((c, i) => badText(c.json, `webhook ${i}`, false)), []);
  t.true(hooks.calls.every((c) => c.json !== undefined), 'every webhook body is JSON');
  t.deepEqual(watch.problems, []);
});
