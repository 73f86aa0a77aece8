import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { RETRY_DELAYS_MS, RETRY_JITTER_RATIO } from '../../src/core/deliveries/retry-schedule.js';
import { SINK_HOST, startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { startFaultyMx, type FaultyMx, type MxFault } from './helpers/faulty-mx.js';

// Proof: a remote MX that stalls, drops mid-DATA, answers 421 or offers broken TLS never
// makes Posthorn lose a message or send it more often than the protocol forces, and never
// takes the service down. Each fault gets fresh emails through the API; they must be
// deferred (DELIVERY_DELAYED with the cause, never FAILED or BOUNCED), and once the fault
// is cleared and the clock passes the retry time, delivered: the good sink behind the
// faulty MX is counted per email id. Stalls are bounded by the SMTP client's timeouts,
// set small through config (outbound.greetingTimeoutMs / socketTimeoutMs); the test waits
// for the engine to go idle, never for a fixed time.

const clock = new ManualClock(Date.UTC(2026, 5, 1, 8, 0, 0));
/** Small enough to keep the file fast, large enough that a healthy session on a loaded box never hits it. */
const TIMEOUT_MS = 3000;
/** Past the socket timeout, so a tarpit (which is never idle) is what it ends. */
const TRANSACTION_TIMEOUT_MS = 4000;
const FAULTY_HOST = 'mx2.sink.test'; // a name in the sink certificate: ENFORCED verifies once the fault is cleared
const FAULTY_DOMAIN = 'faulty.example';
const EMAILS_PER_FAULT = 3;

let w: MailWorld;
let mx: FaultyMx;
let hooks: WebhookReceiver;
let strict: any;

test.before(async () => {
  w = await startMailWorld({
    clock,
    overrides: { outbound: { greetingTimeoutMs: TIMEOUT_MS, socketTimeoutMs: TIMEOUT_MS, transactionTimeoutMs: TRANSACTION_TIMEOUT_MS }, webhooks: { allowPrivate: true, timeoutMs: 5000 } },
  });
  // The faulty MX gets its own loopback address on the (global) outbound port; behind it, the world's sink.
  mx = await startFaultyMx({ host: '127.0.0.2', port: w.sink.port, name: FAULTY_HOST, upstream: { host: w.sink.host, port: w.sink.port } });
  w.zone.set(FAULTY_HOST, 'A', ['127.0.0.2']);
  w.zone.set(FAULTY_DOMAIN, 'MX', [{ exchange: FAULTY_HOST, priority: 10 }]);
  strict = await addVerifiedDomain(w.t0, 'strict.dev');
  const patched = await w.t0.request('PATCH', `/v1/domains/${strict.id}`, { body: { tlsPolicy: 'ENFORCED' } });
  if (patched.status !== 200) throw new Error(JSON.stringify(patched.body));
  hooks = await startWebhookReceiver();
  const hook = await w.t0.request('POST', '/v1/webhooks', {
    body: { url: hooks.url, eventTypes: ['email.delivery_delayed', 'email.delivered', 'email.failed', 'email.bounced'] },
  });
  if (hook.status !== 200) throw new Error(JSON.stringify(hook.body));
});
test.after.always(async () => {
  mx?.dropAll();
  await w?.close();
  await mx?.close();
  await hooks?.close();
});

const email = async (id: string) => (await w.t0.request('GET', `/v1/emails/${id}`)).body;
/** Copies of one email the good sink accepted (the VERP return path names the email). */
const copies = (id: string) => w.sink.messages.filter((m) => m.mailFrom.startsWith(`bounces+${id}_`)).length;
const hookEvents = (id: string, type: string) => hooks.calls.filter((c) => c.json.type === type && c.json.data.id === id).length;
const statuses = (e: any) => (e.emailEvents as any[]).map((x) => x.status);

async function send(to: string, from?: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to, subject: `to ${to}`, ...(from ? { from } : {}) }) });
  if (res.status !== 200) throw new Error(`send failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.emailId as string;
}

/** Past the longest possible wait before the 2nd attempt. */
function advancePastFirstRetry(): void {
  clock.advance(Math.ceil(RETRY_DELAYS_MS[0]! * (1 + RETRY_JITTER_RATIO)) + 1000);
}

/** The service is up while the fault is in progress: health answers and another domain's mail is delivered. */
async function serviceStaysUp(t: any, label: string): Promise<void> {
  const health = await w.t0.request('GET', '/health');
  t.is(health.status, 200, `${label}: /health during the fault`);
  const id = await send(`bystander-${label}@example.net`);
  while (copies(id) === 0) await w.sink.waitForMessages(w.sink.messages.length + 1);
  t.is(copies(id), 1, `${label}: mail to a healthy MX flows during the fault`);
}

interface Case {
  fault: MxFault;
  /** The DELIVERY_DELAYED event's response names the cause. */
  cause: RegExp;
  /** The fault holds the connection open until the client's timeout ends it. */
  stalls: boolean;
  /** Copies the good sink ends up with: 2 only where the sink took the message and its 250 never reached us. */
  expectedCopies: number;
}

const CASES: Case[] = [
  { fault: 'silent', cause: /greeting|timeout|timed out/i, stalls: true, expectedCopies: 1 },
  { fault: '421-greeting', cause: /421/, stalls: false, expectedCopies: 1 },
  { fault: '421-mail', cause: /421/, stalls: false, expectedCopies: 1 },
  { fault: 'stall-at-data', cause: /timeout|timed out/i, stalls: true, expectedCopies: 1 },
  { fault: 'drop-mid-data', cause: /clos|reset|ECONN|lost|unexpected/i, stalls: false, expectedCopies: 1 },
  { fault: '421-data', cause: /421/, stalls: false, expectedCopies: 1 },
  // RFC 5321 6.1 / RFC 1047: a 250 lost after the final dot is the one place SMTP itself
  // duplicates: the sink has the message, we cannot know it, and must send again.
  { fault: 'stall-after-dot', cause: /timeout|timed out/i, stalls: true, expectedCopies: 2 },
  { fault: 'drop-after-dot', cause: /clos|reset|ECONN|lost|unexpected/i, stalls: false, expectedCopies: 2 },
  // A tarpit never lets the socket go idle: only the transaction deadline ends it.
  { fault: 'drip-after-dot', cause: /longer than|deadline/i, stalls: true, expectedCopies: 2 },
];

for (const c of CASES) {
  test.serial(`MX fault "${c.fault}": deferred with its cause, nothing lost, delivered after recovery (${c.expectedCopies} cop${c.expectedCopies === 1 ? 'y' : 'ies'})`, async (t) => {
    mx.setFault(c.fault, { dropAfterBytes: 300 });
    const hitsBefore = mx.faultsHit;
    const ids: string[] = [];
    for (let i = 0; i < EMAILS_PER_FAULT; i++) ids.push(await send(`${c.fault}-${i}@${FAULTY_DOMAIN}`));

    // While the fault is happening (a stalled session is held open right now).
    await mx.waitForFaults(hitsBefore + 1);
    if (c.stalls) t.true(mx.stalled >= 1, 'a session is being held by the faulty MX');
    await serviceStaysUp(t, c.fault);
    if (c.stalls) t.true(mx.stalled >= 1, 'the healthy mail went through while the faulty MX still held a session');

    await w.settle();
    t.is(mx.faultsHit - hitsBefore, EMAILS_PER_FAULT, 'every email met the fault once');
    for (const id of ids) {
      const e = await email(id);
      t.is(e.latestStatus, 'DELIVERY_DELAYED', `${id} deferred`);
      const delayed = e.emailEvents.find((x: any) => x.status === 'DELIVERY_DELAYED');
      t.regex(String(delayed?.data?.response), c.cause, `${id}: the event names the cause`);
      t.false(statuses(e).some((s: string) => s === 'FAILED' || s === 'BOUNCED' || s === 'DELIVERED'));
      t.is(copies(id), c.expectedCopies - 1, `${id}: what the sink has before recovery`);
    }

    mx.setFault('none');
    advancePastFirstRetry();
    await w.settle();
    await w.t0.app.webhookDispatcher.whenIdle();
    for (const id of ids) {
      const e = await email(id);
      t.is(e.latestStatus, 'DELIVERED', `${id} delivered after recovery`);
      t.deepEqual(
        statuses(e).filter((s: string) => s !== 'QUEUED' && s !== 'SENT'),
        ['DELIVERY_DELAYED', 'DELIVERED'],
      );
      t.is(copies(id), c.expectedCopies, `${id}: copies at the good sink`);
      t.is(hookEvents(id, 'email.delivery_delayed'), 1, `${id}: one email.delivery_delayed webhook`);
      t.is(hookEvents(id, 'email.delivered'), 1, `${id}: one email.delivered webhook`);
    }
  });
}

for (const fault of ['421-mail', '421-greeting'] as const) {
  test.serial(`a primary MX that fails the session ("${fault}") is passed over for the backup MX at once`, async (t) => {
    const domain = `backup-${fault}.example`;
    // Primary: the faulty MX; backup (lower preference): the good sink.
    w.zone.set(domain, 'MX', [
      { exchange: FAULTY_HOST, priority: 10 },
      { exchange: SINK_HOST, priority: 20 },
    ]);
    mx.setFault(fault);
    try {
      const hitsBefore = mx.faultsHit;
      const id = await send(`someone@${domain}`);
      await w.settle();
      t.true(mx.faultsHit > hitsBefore, 'the primary was tried first');
      const e = await email(id);
      t.is(e.latestStatus, 'DELIVERED');
      t.false(statuses(e).includes('DELIVERY_DELAYED'));
      t.is(e.emailEvents.find((x: any) => x.status === 'DELIVERED').data.mxHost, SINK_HOST);
      t.is(copies(id), 1);
    } finally {
      mx.setFault('none');
    }
  });
}

test.serial('a destination that stalls every session does not hold up mail to other domains (per-domain in-flight cap)', async (t) => {
  const BACKLOG = 200; // more than half the engine's in-flight window (300): enough to fill it without the cap
  mx.setFault('stall-at-data');
  const hitsBefore = mx.faultsHit;
  const ids: string[] = [];
  for (let b = 0; b < BACKLOG / 100; b++) {
    const batch = Array.from({ length: 100 }, (_, i) => sendBody(w, { to: `stuck-${b}-${i}@${FAULTY_DOMAIN}`, subject: 'stuck' }));
    const res = await w.t0.request('POST', '/v1/emails/batch', { body: batch });
    t.is(res.status, 200);
    ids.push(...res.body.data.map((d: any) => d.emailId as string));
  }
  await mx.waitForFaults(hitsBefore + 1);
  const id = await send('not-stuck@example.net');
  while (copies(id) === 0) await w.sink.waitForMessages(w.sink.messages.length + 1);
  // Delivered while the stalled destination's first sessions are still held: without the cap
  // it waited for a third of the backlog to time out (the window frees at half).
  t.true(mx.stalled >= 1, 'the stalled sessions are still held');
  t.true(mx.faultsHit - hitsBefore <= 30, `${mx.faultsHit - hitsBefore} stalled sessions before the other domain's mail went out`);

  mx.setFault('none');
  await w.settle();
  advancePastFirstRetry();
  await w.settle();
  for (const e of ids) t.is(copies(e), 1, `${e} delivered once after recovery`);
});

test.serial('OPPORTUNISTIC with broken TLS (untrusted certificate, garbage handshake): delivered at once, exactly once', async (t) => {
  // Certificate first: after a failed handshake the pool remembers the host and goes plaintext directly.
  for (const fault of ['tls-bad-cert', 'tls-garbage'] as const) {
    mx.setFault(fault);
    const hitsBefore = mx.faultsHit;
    const id = await send(`${fault}@${FAULTY_DOMAIN}`);
    await w.settle();
    t.true(mx.faultsHit > hitsBefore, `${fault}: the client met the broken TLS`);
    const e = await email(id);
    t.is(e.latestStatus, 'DELIVERED', `${fault}: RFC 7435, any encryption or none beats not delivering`);
    t.false(statuses(e).includes('DELIVERY_DELAYED'));
    t.is(copies(id), 1, `${fault}: exactly once`);
  }
  mx.setFault('none');
});

test.serial('ENFORCED with an untrusted certificate: deferred, nothing sent; delivered over verified TLS once the certificate is fixed', async (t) => {
  mx.setFault('tls-bad-cert');
  const plaintextBefore = mx.plaintextMailCommands;
  const id = await send(`strict-cert@${FAULTY_DOMAIN}`, `Strict <hello@${strict.name}>`);
  await w.settle();
  let e = await email(id);
  t.is(e.latestStatus, 'DELIVERY_DELAYED');
  t.regex(e.emailEvents.find((x: any) => x.status === 'DELIVERY_DELAYED').data.response, /certificate|TLS/i);
  t.is(copies(id), 0, 'not sent over a TLS session that did not verify');
  t.is(mx.plaintextMailCommands, plaintextBefore, 'never in plaintext either');

  mx.setFault('none'); // the real MX with the trusted certificate, end to end
  advancePastFirstRetry();
  await w.settle();
  e = await email(id);
  t.is(e.latestStatus, 'DELIVERED');
  t.is(copies(id), 1);
  t.true(w.sink.messages.find((m) => m.mailFrom.startsWith(`bounces+${id}_`))!.secure, 'over TLS');
});

test.serial('ENFORCED with a garbage TLS handshake: deferred on every attempt, FAILED after the maximum age, never sent in plaintext', async (t) => {
  mx.setFault('tls-garbage');
  const plaintextBefore = mx.plaintextMailCommands;
  const hitsBefore = mx.faultsHit;
  const id = await send(`strict-garbage@${FAULTY_DOMAIN}`, `Strict <hello@${strict.name}>`);
  const healthy = await send('still-fine@example.net');
  await w.settle();
  let e = await email(id);
  t.is(e.latestStatus, 'DELIVERY_DELAYED');
  t.regex(e.emailEvents.find((x: any) => x.status === 'DELIVERY_DELAYED').data.response, /TLS|SSL|handshake/i);
  t.is((await email(healthy)).latestStatus, 'DELIVERED', 'the same team and domain still deliver elsewhere');

  for (let i = 0; i < 40 && e.latestStatus !== 'FAILED'; i++) {
    clock.advance(3 * 3600_000);
    await w.settle();
    e = await email(id);
  }
  t.is(e.latestStatus, 'FAILED');
  t.regex(e.emailEvents.find((x: any) => x.status === 'FAILED').data.failed.reason, /gave up after \d+ attempts/);
  const attempts = mx.faultsHit - hitsBefore;
  t.true(attempts >= 10, `retried along the table (${attempts} attempts)`);
  t.is(mx.plaintextMailCommands, plaintextBefore, 'no MAIL FROM ever went out in plaintext');
  t.is(copies(id), 0, 'the sink never saw it');
  await w.t0.app.webhookDispatcher.whenIdle();
  t.is(hookEvents(id, 'email.failed'), 1);
  t.is(hookEvents(id, 'email.delivery_delayed'), 1, 'the delay is announced once, not on every retry');
  t.is((await w.t0.request('GET', '/health')).status, 200);
});
