import net from 'node:net';
import test from 'ava';
import fc from 'fast-check';
import { WEBHOOK_MAX_ATTEMPTS, WEBHOOK_RETRY_DELAYS_MS, WEBHOOK_RETRY_JITTER_RATIO } from '../../src/core/webhooks/webhook-retry.js';
import { ManualClock } from '../../src/lib/clock.js';
import { mxAllowed, parseStsPolicy, type StsPolicy } from '../../src/smtp/outbound/mta-sts-policy.js';
import { selfSignedLeaf } from '../helpers/test-ca.js';
import { startTlsWorld, tlsSend, type Mx, type TlsWorld } from '../helpers/tls-world.js';
import { baseSeed, fcParams } from './helpers/fuzz-config.js';
import { watchProcess } from './helpers/http-probe.js';
import { startHostileHttp, STREAM_CAP_BYTES, type Answer, type Exchange, type HostileHttp } from './helpers/hostile-http.js';
import { answer, policyAnswer, policyText, wellBehaved } from './helpers/https-arbitraries.js';

// Proof: Posthorn's outbound HTTP(S) clients against servers other people run, each answer
// written by fast-check (hostile-http.ts, https-arbitraries.ts): every status class (1xx before
// or instead of the answer, 101, redirects to a trap or to a private address), broken status
// lines, odd, duplicate, huge and invalid headers, Content-Length lying short or long, chunked
// encoding broken or endless, bodies empty, binary, with NUL, invalid UTF-8, past every cap or
// endless, wrong media types, answers before the request body is read, dripped, cut anywhere,
// silence and resets; on TLS a certificate for another name, an untrusted one, garbage, a close,
// silence. Three clients, one world (startTlsWorld), the injected clock and DNS zone:
// - webhooks (http-out/): requests received for an event never exceed the attempts recorded, and
//   each attempt beyond them is a connection failure; an attempt succeeds only on a 2xx answer
//   and always on a clean one; no redirect is followed; a hung endpoint costs the timeout; the
//   stored excerpts and errors are text both stores keep, bounded; retries keep to the table;
//   once the endpoint behaves, every event is acknowledged or was abandoned after 6 attempts;
// - MTA-STS policy fetches: a policy is adopted only from a 200 served as text/plain, under
//   64 KiB, over a certificate valid for the policy host, and always from a clean one; a failed
//   fetch never bounces or blocks a domain's mail, keeps a cached policy in force, and mail never
//   goes to an MX the adopted enforce policy excludes; once the host behaves, all is delivered;
// - TLS-RPT POSTs to https: rua targets: one connection per recorded attempt, sent only on a
//   2xx and always on a clean one, a failure retried on the documented table;
// and throughout: no crash or unhandled rejection, /health 200, no 5xx from the API, an endless
// body is dropped by the client long before STREAM_CAP_BYTES.

const clock = new ManualClock(Date.UTC(2026, 5, 1, 8, 0, 0));
/** Webhook and TLS report POST timeout: small, so a hung server costs little. */
const TIMEOUT_MS = 1500;
const FETCH_TIMEOUT_MS = 1500;
/** What Posthorn keeps of a webhook answer (core/webhooks/webhook-outbox.ts). */
const MAX_BODY_CHARS = 4096;
/** Bound on any stored error text: a server's header must not make it grow without limit. */
const MAX_ERROR_CHARS = 2000;
const MAX_POLICY_BYTES = 64 * 1024;
const REPORT_RETRY_MINUTES = [5, 30, 120, 360, 720];
const HOOK_BATCHES = 45;
const STS_BATCHES = 60;
const REPORT_BATCHES = 20;
const HOOK_HOSTS = ['hook-a.hostile.test', 'hook-b.hostile.test', 'hook-c.hostile.test'];
const stsDomains = (n: number) => [`f${n}.sts.test`, `c${n}.sts.test`];
/** Policy and report hosts the good certificate names: batches beyond them (while shrinking) are skipped. */
const NAME_SLOTS = 8;
/**
 * A property's parameters with its runs kept to half the names the certificate covers (a larger
 * FUZZ_RUNS would otherwise end in skipped runs, which fast-check reports as a failure); the
 * other half is left for shrinking.
 */
const namedParams = (name: string, batches: number) => {
  const params = fcParams(name, batches);
  return { ...params, numRuns: Math.min(params.numRuns, (batches * NAME_SLOTS) / 2) };
};
const reportDomain = (n: number) => `r${n}.rpt.test`;
/** Finished reports are deleted this many days after their day (tls-report-service.ts). */
const KEEP_REPORTS_DAYS = 30;
/** Each report domain's reported day (its UTC midnight) and the state its delivery was last seen in. */
const reportSeen = new Map<string, { dayMs: number; state?: string }>();

let w: TlsWorld;
let hostile: HostileHttp;
let mx2: Mx;
let watch: ReturnType<typeof watchProcess>;
let trap: net.Server;
let trapConnections = 0;
let trapUrls: string[];
const hooks: { id: string; host: string; path: string }[] = [];
let rssBefore = 0;

test.before(async () => {
  watch = watchProcess();
  hostile = await startHostileHttp();
  trap = net.createServer((s) => {
    trapConnections++;
    s.destroy();
  });
  await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', () => resolve()));
  const trapPort = (trap.address() as net.AddressInfo).port;
  trapUrls = [`http://127.0.0.1:${trapPort}/followed`, `https://trap.hostile.test:${trapPort}/followed`, `http://trap.hostile.test:${trapPort}/`, 'http://169.254.169.254/latest/meta-data/'];
  const policyHosts = Array.from({ length: STS_BATCHES * NAME_SLOTS }, (_, n) => stsDomains(n)).flat();
  const reportHosts = Array.from({ length: REPORT_BATCHES * NAME_SLOTS }, (_, n) => reportDomain(n));
  w = await startTlsWorld({
    clock,
    policyDomains: ['unused.test'],
    overrides: {
      // The hostile endpoint fails most calls on purpose: an auto-disable would discard the
      // events whose retry schedule this proof checks (webhook-status.test.ts covers it).
      webhooks: { allowPrivate: true, timeoutMs: TIMEOUT_MS, disableAfterFailures: 0 },
      outbound: { mtaSts: { httpsPort: hostile.httpsPort, fetchTimeoutMs: FETCH_TIMEOUT_MS }, tlsReports: { allowPrivate: true } },
    },
  });
  const names = [...policyHosts.map((d) => `mta-sts.${d}`), ...reportHosts.map((d) => `reports.${d}`)];
  hostile.setCertificates({ good: await w.ca.issue({ hostnames: names }), wrongName: await w.ca.issue({ hostnames: ['wrong.invalid'] }), untrusted: await selfSignedLeaf(names) });
  w.zone.set('trap.hostile.test', 'A', ['127.0.0.1']);
  for (const h of HOOK_HOSTS) w.zone.set(h, 'A', ['127.0.0.1']);
  for (const n of names) w.zone.set(n, 'A', ['127.0.0.1']);
  mx2 = await w.addMx('mx2.tls.test', 'good');
  w.setMx('hooks.test', [w.mx1.host]);
  rssBefore = process.memoryUsage().rss;
  for (const [i, host] of HOOK_HOSTS.entries()) {
    const path = `/hook-${i}`;
    // The third over TLS: the webhook client trusts the system CAs only, never the test CA, so
    // every attempt there must fail at the handshake (or its garbage, close or silence).
    const url = i === 2 ? `https://${host}:${hostile.httpsPort}${path}` : `http://${host}:${hostile.httpPort}${path}`;
    const res = await w.t0.request('POST', '/v1/webhooks', { body: { url, eventTypes: ['email.queued', 'webhook.test'] } });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    hooks.push({ id: res.body.id, host, path });
  }
});
test.after.always(async () => {
  watch?.stop();
  hostile?.dropAll();
  await w?.close();
  await hostile?.close();
  await new Promise<void>((r) => (trap ? trap.close(() => r()) : r()));
});

/** Node 20 has String.prototype.isWellFormed; the compile target's lib does not name it yet. */
const wellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();
function badText(value: unknown, path: string, max: number, out: string[] = []): string[] {
  if (typeof value !== 'string') return out;
  if (!wellFormed(value)) out.push(`${path}: lone surrogate in ${JSON.stringify(value.slice(0, 80))}`);
  if (value.includes('\u0000')) out.push(`${path}: NUL in ${JSON.stringify(value.slice(0, 80))}`);
  if (value.length > max) out.push(`${path}: ${value.length} characters (more than ${max}): ${JSON.stringify(value.slice(0, 120))}...`);
  return out;
}

const show = (a: Answer) => `${a.label} [${a.bytes.subarray(0, 90).toString('latin1').replace(/[^\x20-\x7e]/g, '.')}${(a.size ?? a.bytes.length) > 90 ? `...(${a.size ?? a.bytes.length})` : ''}]`;
const describe = (answers: Answer[]) => answers.map(show).join(' | ');

async function commonProblems(): Promise<string[]> {
  const problems: string[] = [];
  const health = await w.t0.request('GET', '/health');
  if (health.status !== 200) problems.push(`/health: ${health.status}`);
  if (trapConnections > 0) problems.push(`a redirect was followed: ${trapConnections} connection(s) to the trap`);
  for (const ex of hostile.exchanges) if (ex.streamCapped) problems.push(`${ex.host}${ex.path}: the client read an endless body to ${STREAM_CAP_BYTES} bytes (${ex.answer.label})`);
  problems.push(...watch.problems.splice(0));
  return problems;
}

// ---- webhooks

interface Attempt {
  eventId: string;
  attempt: number;
  status: 'SUCCEEDED' | 'FAILED';
  response: { status: number; body: string | null } | null;
  durationMs: number;
  error: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
}

async function attemptsOf(webhookId: string, problems: string[]): Promise<Attempt[]> {
  const all: Attempt[] = [];
  let cursor: string | null = null;
  do {
    const res: { status: number; body: any } = await w.t0.request('GET', `/v1/webhooks/${webhookId}/attempts?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
    if (res.status !== 200) {
      problems.push(`GET attempts of ${webhookId}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
      return all;
    }
    all.push(...res.body.attempts);
    cursor = res.body.nextCursor;
  } while (cursor);
  return all.reverse();
}

const is2xx = (s: number | null | undefined) => typeof s === 'number' && s >= 200 && s < 300;

async function webhookProblems(final: boolean): Promise<string[]> {
  const problems: string[] = [];
  for (const hook of hooks) {
    const attempts = await attemptsOf(hook.id, problems);
    const requests = hostile.exchanges.filter((x) => x.path === hook.path);
    const events = new Set([...attempts.map((a) => a.eventId), ...requests.map((r) => r.headers['x-service-event-id']!)]);
    for (const eventId of events) {
      const where = `${hook.path} ${eventId}`;
      const mine = attempts.filter((a) => a.eventId === eventId).sort((a, b) => a.attempt - b.attempt);
      const reqs = requests.filter((r) => r.headers['x-service-event-id'] === eventId);
      const said = () => `attempts ${JSON.stringify(mine.map((a) => [a.attempt, a.status, a.response?.status ?? null, a.error?.slice(0, 80)]))}; answers ${reqs.map((r) => show(r.answer)).join(' | ')}`;
      if (reqs.length > mine.length) problems.push(`${where}: ${reqs.length} requests received, ${mine.length} attempts recorded; ${said()}`);
      const noResponse = mine.filter((a) => a.response === null).length;
      if (mine.length - reqs.length > noResponse) problems.push(`${where}: ${mine.length - reqs.length} attempts the endpoint never saw, but only ${noResponse} without an answer; ${said()}`);
      if (mine.length > WEBHOOK_MAX_ATTEMPTS) problems.push(`${where}: ${mine.length} attempts`);
      mine.forEach((a, i) => {
        if (a.attempt !== i + 1) problems.push(`${where}: attempt numbers ${mine.map((x) => x.attempt).join(',')}`);
        problems.push(...badText(a.response?.body ?? null, `${where} attempt ${a.attempt} response body`, MAX_BODY_CHARS), ...badText(a.error, `${where} attempt ${a.attempt} error`, MAX_ERROR_CHARS));
        if (a.durationMs > TIMEOUT_MS + 1500) problems.push(`${where}: attempt ${a.attempt} took ${a.durationMs} ms (timeout ${TIMEOUT_MS})`);
        if (a.status === 'SUCCEEDED') {
          if (!is2xx(a.response?.status)) problems.push(`${where}: SUCCEEDED with ${JSON.stringify(a.response?.status)}; ${said()}`);
          if (!reqs.some((r) => is2xx(r.answer.status) || r.outOfStep)) problems.push(`${where}: SUCCEEDED, but no request of it was answered with a 2xx; ${said()}`);
          if (i !== mine.length - 1 || a.nextAttemptAt !== null) problems.push(`${where}: an attempt after a success, or a retry scheduled; ${said()}`);
        } else if (a.response !== null && !reqs.some((r) => r.answer.status === a.response!.status || r.outOfStep)) {
          problems.push(`${where}: recorded HTTP ${a.response.status}, which no answer carried; ${said()}`);
        }
        if (a.status === 'FAILED' && a.attempt < WEBHOOK_MAX_ATTEMPTS) {
          const delay = Date.parse(a.nextAttemptAt ?? '') - Date.parse(a.createdAt);
          const base = WEBHOOK_RETRY_DELAYS_MS[a.attempt - 1]!;
          if (!(delay >= base && delay <= Math.ceil(base * (1 + WEBHOOK_RETRY_JITTER_RATIO)) + 1)) problems.push(`${where}: attempt ${a.attempt} retried after ${delay} ms, not on the table (${base} ms)`);
          const nextOne = mine[i + 1];
          if (nextOne && Date.parse(nextOne.createdAt) < Date.parse(a.nextAttemptAt!)) problems.push(`${where}: attempt ${nextOne.attempt} made before its time`);
        }
        if (a.status === 'FAILED' && a.attempt === WEBHOOK_MAX_ATTEMPTS && a.nextAttemptAt !== null) problems.push(`${where}: a 7th attempt scheduled`);
      });
      // A clean 2xx answer acknowledges the event: nothing more is sent for it.
      const cleanOk = reqs.findIndex((r) => r.answer.clean && is2xx(r.answer.status) && !r.outOfStep);
      if (cleanOk >= 0 && !mine.some((a) => a.status === 'SUCCEEDED')) problems.push(`${where}: answered a clean ${reqs[cleanOk]!.answer.status}, never SUCCEEDED; ${said()}`);
      if (hook.path === '/hook-2' && (reqs.length > 0 || mine.some((a) => a.status === 'SUCCEEDED' || a.response !== null || !a.error))) problems.push(`${where}: over a certificate the client does not trust, ${reqs.length} requests were made; ${said()}`);
      if (final && !mine.some((a) => a.status === 'SUCCEEDED') && mine.length !== WEBHOOK_MAX_ATTEMPTS) problems.push(`${where}: neither acknowledged nor abandoned after ${WEBHOOK_MAX_ATTEMPTS} attempts; ${said()}`);
    }
  }
  return problems;
}

let hookSerial = 0;
let stuck = false;
/** Far more than a batch's attempts take (each bounded by TIMEOUT_MS, several at once). */
const IDLE_BOUND_MS = 20_000;
async function idleWithin(ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const idle = await Promise.race([w.t0.app.webhookDispatcher.whenIdle().then(() => true as const), late]);
  clearTimeout(timer);
  return idle;
}
test.serial('webhooks against a hostile endpoint: every request on record, success only on a 2xx, no redirect followed, bounded, valid text', async (t) => {
  const stats = { batches: 0, events: 0 };
  const batch = fc.record({
    answers: fc.array(answer({ use: 'webhook', redirects: trapUrls }), { minLength: 1, maxLength: 4 }),
    emails: fc.integer({ min: 0, max: 2 }),
    testEvent: fc.boolean(),
    advanceMs: fc.constantFrom(0, 0, 6_000, 40_000, 3 * 60_000, 12 * 60_000),
  });
  const property = fc.asyncProperty(batch.map((b) => Object.assign(b, { [fc.toStringMethod]: () => `${describe(b.answers)} emails ${b.emails} test ${b.testEvent} advance ${b.advanceMs}` })), async (b) => {
    hostile.setAnswers(b.answers);
    clock.advance(b.advanceMs);
    for (let i = 0; i < b.emails; i++) {
      const res = await w.t0.request('POST', '/v1/emails', { body: tlsSend(`h${hookSerial++}@hooks.test`) });
      if (res.status !== 200) throw new Error(`send: ${res.status} ${JSON.stringify(res.body)}`);
      stats.events++;
    }
    if (b.testEvent) {
      const res = await w.t0.request('POST', `/v1/webhooks/${hooks[0]!.id}/test`);
      if (res.status >= 500) throw new Error(`test event: ${res.status} ${JSON.stringify(res.body)}`);
    }
    if (stuck) return; // a call stuck in flight stays so: later runs (shrinking) could only wait on it
    w.t0.app.webhookDispatcher.wake();
    if (!(await idleWithin(IDLE_BOUND_MS))) {
      stuck = true;
      throw new Error(`the dispatcher was not idle ${IDLE_BOUND_MS} ms after the batch (each attempt has ${TIMEOUT_MS} ms): a call is in flight for good; the requests: ${hostile.exchanges.slice(-8).map((x) => show(x.answer)).join(' | ')}`);
    }
    stats.batches++;
    const problems = [...(await webhookProblems(false)), ...(await commonProblems())];
    if (problems.length) throw new Error(problems.slice(0, 10).join('\n'));
  });
  const details = await fc.check(property, fcParams('https webhooks', HOOK_BATCHES));
  const error = (details.errorInstance as Error | undefined)?.message ?? '';
  t.false(details.failed, `seed ${details.seed}, path "${details.counterexamplePath}": ${error.slice(0, 6000)}`);
  const labels = new Map<string, number>();
  for (const x of hostile.exchanges) labels.set(x.answer.label.split(' ')[0]!, (labels.get(x.answer.label.split(' ')[0]!) ?? 0) + 1);
  t.log(`base seed ${baseSeed()}: ${stats.batches} batches, ${stats.events} emails, ${hostile.exchanges.length} requests (${[...labels].map(([k, v]) => `${k} ${v}`).join(', ')})`);
});

test.serial('webhooks: once the endpoint behaves, every event is acknowledged or was abandoned on the schedule', async (t) => {
  hostile.setAnswers([wellBehaved(200, 'ok')]);
  // The whole table (about 51 minutes with jitter) from the last attempt, in 5-minute steps.
  const pending = async () => (await w.t0.app.store.db.selectFrom('webhook_calls').select('id').where('state', '=', 'pending').execute()).length;
  for (let step = 0; step < 36 && (await pending()) > 0; step++) {
    clock.advance(5 * 60_000);
    w.t0.app.webhookDispatcher.wake();
    if (!(await idleWithin(IDLE_BOUND_MS))) break;
  }
  t.deepEqual([...(await webhookProblems(true)), ...(await commonProblems())], []);
  // The endpoints go, so the mail of the next tests writes no calls to them.
  for (const h of hooks) t.is((await w.t0.request('DELETE', `/v1/webhooks/${h.id}`)).status, 200);
});

// ---- MTA-STS

const ENFORCE_MX1 = ['version: STSv1', 'mode: enforce', 'mx: mx1.tls.test', 'max_age: 604800', ''].join('\r\n');
const SANE = ['version: STSv1', 'mode: enforce', 'mx: *.tls.test', 'max_age: 604800', ''].join('\r\n');
const policyMx = fc.constantFrom<string[]>(['mx1.tls.test'], ['*.tls.test'], ['mx.elsewhere.test'], ['mx1.tls.test', 'mx2.tls.test'], ['mx2.tls.test']);
const CONTENT_TYPE_OK = /^text\/plain\s*(;|$)/i;

interface StsSent {
  n: number;
  domain: string;
  kind: 'fresh' | 'cached';
  emailId: string;
  rcpt: string;
  /** Exchanges and connections of the hostile server before this batch's mail. */
  fromExchange: number;
  fromConnection: number;
}
const stsSent: StsSent[] = [];

async function storedPolicy(domain: string): Promise<{ id: string; policy: StsPolicy } | null> {
  const row = await w.t0.app.store.db.selectFrom('mta_sts_policies').selectAll().where('domain', '=', domain).executeTakeFirst();
  return row ? { id: row.policy_id, policy: parseStsPolicy(row.body) } : null;
}

const samePolicy = (a: StsPolicy, b: StsPolicy) => a.mode === b.mode && a.maxAgeSeconds === b.maxAgeSeconds && JSON.stringify(a.mx) === JSON.stringify(b.mx);
function parsesTo(text: string | undefined): StsPolicy | null {
  try {
    return text === undefined ? null : parseStsPolicy(text);
  } catch {
    return null;
  }
}
/** An answer a policy may be adopted from: 200, text/plain, under the cap, over a good certificate. */
const adoptable = (x: Exchange) => x.answer.status === 200 && x.answer.tls === 'good' && CONTENT_TYPE_OK.test(x.answer.contentType ?? '') && (x.answer.bodyBytes ?? 0) <= MAX_POLICY_BYTES;

async function stsProblems(mine: StsSent[]): Promise<string[]> {
  const problems: string[] = [];
  const rows = await w.t0.app.store.db.selectFrom('deliveries').selectAll().where('email_id', 'in', mine.map((s) => s.emailId)).execute();
  for (const s of mine) {
    const where = `${s.kind} ${s.domain}`;
    const host = `mta-sts.${s.domain}`;
    const exchanges = hostile.exchanges.slice(s.fromExchange).filter((x) => x.host === host);
    const conns = hostile.connections.slice(s.fromConnection).filter((c) => c.sni === host);
    const said = () => `answers ${exchanges.map((x) => show(x.answer)).join(' | ') || '(none)'}; connections ${conns.map((c) => `${c.tls}${c.handshake ? '' : ' no-handshake'}`).join(', ')}`;
    const stored = await storedPolicy(s.domain);
    const adopted = stored && stored.id === String(s.n) ? stored.policy : null;
    if (adopted) {
      if (!exchanges.some(adoptable)) problems.push(`${where}: policy adopted (${JSON.stringify(adopted)}) without a 200 text/plain answer under 64 KiB over a good certificate; ${said()}`);
      const clean = exchanges.filter((x) => adoptable(x) && x.answer.clean);
      if (clean.length && !clean.some((x) => samePolicy(parsesTo(x.answer.policy) ?? ({} as StsPolicy), adopted))) problems.push(`${where}: adopted ${JSON.stringify(adopted)}, not what was served; ${said()}`);
    } else {
      const owed = exchanges.find((x) => adoptable(x) && x.answer.clean && parsesTo(x.answer.policy));
      if (owed) problems.push(`${where}: a clean, valid policy was served but not adopted; ${said()}`);
    }
    // The policy in force for this delivery: the new one, or (cached domains) the one from before.
    const inForce = adopted ?? (s.kind === 'cached' ? parseStsPolicy(ENFORCE_MX1) : null);
    const mxHost = s.kind === 'fresh' ? w.mx1.host : mx2.host;
    const blocked = inForce !== null && inForce.mode === 'enforce' && !mxAllowed(mxHost, inForce);
    const r = rows.find((x) => x.email_id === s.emailId);
    const state = `${r?.state} ${r?.last_code} ${JSON.stringify((r?.last_response ?? '').slice(0, 200))}`;
    if (!r) problems.push(`${where}: no delivery`);
    else if (blocked) {
      if (r.state !== 'queued') problems.push(`${where}: ${state}, though the policy in force (${JSON.stringify(inForce)}) excludes ${mxHost}; ${said()}`);
    } else if (r.state !== 'delivered') problems.push(`${where}: ${state}, though nothing in force forbids ${mxHost} (${JSON.stringify(inForce)}); ${said()}`);
    if (r?.lease_owner) problems.push(`${where}: still leased`);
    problems.push(...badText(r?.last_response ?? null, `${where} last_response`, MAX_ERROR_CHARS));
    const sink = s.kind === 'fresh' ? w.mx1.sink : mx2.sink;
    if (blocked && sink.messages.some((m) => m.rcptTo.includes(s.rcpt))) problems.push(`${where}: delivered to ${mxHost}, which the enforce policy in force excludes`);
  }
  const events = await w.t0.app.store.db.selectFrom('email_events').select(['email_id', 'status', 'data_json']).where('email_id', 'in', mine.map((s) => s.emailId)).execute();
  for (const e of events) problems.push(...badText(e.data_json, `${e.email_id} ${e.status} event`, 20_000));
  for (const s of mine) {
    const res = await w.t0.request('GET', `/v1/emails/${s.emailId}`);
    if (res.status !== 200) problems.push(`GET /v1/emails/${s.emailId}: ${res.status}`);
  }
  return problems;
}

async function send(rcpt: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: tlsSend(rcpt) });
  if (res.status !== 200) throw new Error(`send: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.emailId;
}

test.serial('MTA-STS against a hostile policy host: adopted only from a good answer, never a bounce, a cached policy kept, never an excluded MX', async (t) => {
  let n = 0;
  const batch = fc.array(policyAnswer({ use: 'policy', redirects: trapUrls, policy: policyText(policyMx) }), { minLength: 1, maxLength: 3 });
  const property = fc.asyncProperty(batch.map((b) => Object.assign(b, { [fc.toStringMethod]: () => describe(b) })), async (answers) => {
    const i = n++;
    fc.pre(i < STS_BATCHES * NAME_SLOTS);
    const [fresh, cached] = stsDomains(i) as [string, string];
    // The cached domain first gets a good enforce policy listing mx1 only. MX records live 0 s, so the move below is seen at once.
    hostile.setAnswers([wellBehaved(200, ENFORCE_MX1)]);
    w.zone.set(cached, 'MX', [{ exchange: w.mx1.host, priority: 10 }], 0);
    w.zone.set(`_mta-sts.${cached}`, 'TXT', ['v=STSv1; id=a;'], 0);
    await send(`setup@${cached}`);
    await w.settle();
    if ((await storedPolicy(cached))?.id !== 'a') throw new Error(`setup: ${cached} has no cached policy`);
    // Then its MX moves to mx2, it announces a new id, and the policy host turns hostile.
    w.zone.set(cached, 'MX', [{ exchange: mx2.host, priority: 10 }], 0);
    w.zone.set(`_mta-sts.${cached}`, 'TXT', [`v=STSv1; id=${i};`], 0);
    w.setMx(fresh, [w.mx1.host]);
    w.zone.set(`_mta-sts.${fresh}`, 'TXT', [`v=STSv1; id=${i};`], 0);
    hostile.setAnswers(answers);
    const mine: StsSent[] = [];
    const fromExchange = hostile.exchanges.length;
    const fromConnection = hostile.connections.length;
    for (const [domain, kind] of [[fresh, 'fresh'], [cached, 'cached']] as const) {
      const rcpt = `m${i}@${domain}`;
      mine.push({ n: i, domain, kind, rcpt, emailId: await send(rcpt), fromExchange, fromConnection });
    }
    await w.settle();
    stsSent.push(...mine);
    const problems = [...(await stsProblems(mine)), ...(await commonProblems())];
    if (problems.length) throw new Error(problems.slice(0, 10).join('\n'));
  });
  const details = await fc.check(property, namedParams('https mta-sts', STS_BATCHES));
  const error = (details.errorInstance as Error | undefined)?.message ?? '';
  t.false(details.failed, `seed ${details.seed}, path "${details.counterexamplePath}": ${error.slice(0, 6000)}`);
  const adopted = (await w.t0.app.store.db.selectFrom('mta_sts_policies').select(['domain', 'policy_id']).execute()).filter((r) => r.policy_id !== 'a').length;
  t.log(`base seed ${baseSeed()}: ${n} batches, ${adopted} of ${stsSent.length} new policies adopted, ${hostile.exchanges.filter((x) => x.host.startsWith('mta-sts.')).length} policy requests`);
});

test.serial('MTA-STS: once the policy host behaves, every deferred message is delivered', async (t) => {
  hostile.setAnswers([wellBehaved(200, SANE)]);
  for (const s of stsSent) w.zone.set(`_mta-sts.${s.domain}`, 'TXT', ['v=STSv1; id=sane;'], 0);
  const ids = stsSent.map((s) => s.emailId);
  const queued = async () => (await w.t0.app.store.db.selectFrom('deliveries').select('id').where('email_id', 'in', ids).where('state', '=', 'queued').execute()).length;
  for (let hour = 0; hour < 30 && (await queued()) > 0; hour++) {
    clock.advance(3_600_000);
    await w.settle();
  }
  t.is(await queued(), 0, 'nothing left deferred');
  const rows = await w.t0.app.store.db.selectFrom('deliveries').select(['email_id', 'recipient', 'state']).where('email_id', 'in', ids).execute();
  for (const r of rows) t.is(r.state, 'delivered', `${r.recipient}`);
  t.deepEqual(await commonProblems(), []);
});

// ---- TLS-RPT

async function reportProblems(upTo: number): Promise<string[]> {
  const problems: string[] = [];
  const rows = await w.t0.app.store.db.selectFrom('tls_report_deliveries').selectAll().where('policy_domain', 'like', '%.rpt.test').execute();
  for (let n = 0; n < upTo; n++) {
    const domain = reportDomain(n);
    const host = `reports.${domain}`;
    const r = rows.find((x) => x.policy_domain === domain);
    const conns = hostile.connections.filter((c) => c.sni === host);
    const exchanges = hostile.exchanges.filter((x) => x.host === host);
    const said = () => `${r?.state} after ${r?.attempts} (${JSON.stringify(r?.last_error?.slice(0, 160))}); answers ${conns.map((c) => c.exchanges[0] ? show(c.exchanges[0].answer) : `tls ${c.tls}${c.handshake ? '' : ' no-handshake'}`).join(' | ')}`;
    const seen = reportSeen.get(domain);
    if (!r) {
      // A long run (FUZZ_RUNS) moves the clock a day per batch: a finished report older than
      // the retention is history and deleted; a pending one never is.
      const expired = seen !== undefined && clock.nowMs() - seen.dayMs >= (KEEP_REPORTS_DAYS + 1) * 86_400_000;
      if (!(expired && (seen.state === 'sent' || seen.state === 'failed'))) problems.push(`${domain}: no report delivery (last seen ${seen?.state})`);
      continue;
    }
    if (seen) seen.state = r.state;
    if (conns.length !== r.attempts) problems.push(`${domain}: ${conns.length} connections, ${r.attempts} attempts recorded; ${said()}`);
    if (exchanges.some((x) => x.method !== 'POST' || x.headers['content-type'] !== 'application/tlsrpt+gzip')) problems.push(`${domain}: a request that is no report POST`);
    if (r.state === 'sent' && !exchanges.some((x) => is2xx(x.answer.status) && x.answer.tls === 'good')) problems.push(`${domain}: sent without a 2xx answer; ${said()}`);
    if (r.state !== 'sent' && exchanges.some((x) => x.answer.clean && is2xx(x.answer.status))) problems.push(`${domain}: answered a clean 2xx, but ${r.state}; ${said()}`);
    if (r.state === 'failed' && r.attempts < REPORT_RETRY_MINUTES.length + 1) problems.push(`${domain}: given up after ${r.attempts} attempts; ${said()}`);
    if (r.state === 'pending' && r.attempts > 0) {
      const delay = REPORT_RETRY_MINUTES[r.attempts - 1]! * 60_000;
      if (r.next_attempt_at !== Date.parse(r.updated_at) + delay) problems.push(`${domain}: next attempt at ${r.next_attempt_at}, not ${delay} ms after ${r.updated_at}`);
    }
    if (r.lease_until !== null) problems.push(`${domain}: still leased`);
    problems.push(...badText(r.last_error, `${domain} last_error`, MAX_ERROR_CHARS));
  }
  return problems;
}

test.serial('TLS-RPT POSTs to a hostile collector: one connection per attempt, sent only on a 2xx, failures retried on the table', async (t) => {
  let n = 0;
  const batch = fc.array(answer({ use: 'report', redirects: trapUrls }), { minLength: 1, maxLength: 3 });
  const property = fc.asyncProperty(batch.map((b) => Object.assign(b, { [fc.toStringMethod]: () => describe(b) })), async (answers) => {
    const i = n++;
    fc.pre(i < REPORT_BATCHES * NAME_SLOTS);
    const domain = reportDomain(i);
    w.setMx(domain, [w.mx1.host]);
    w.zone.set(`_smtp._tls.${domain}`, 'TXT', [`v=TLSRPTv1; rua=https://reports.${domain}:${hostile.httpsPort}/tlsrpt`]);
    await send(`r@${domain}`);
    await w.settle();
    await w.t0.app.tlsReports.flushCounts();
    // The next day's run reports this day (and retries what earlier runs left).
    const today = new Date(clock.nowMs());
    reportSeen.set(domain, { dayMs: Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate()) });
    clock.set(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() + 1, 1, 30));
    hostile.setAnswers(answers);
    await w.t0.app.tlsReports.runNow();
    const problems = [...(await reportProblems(i + 1)), ...(await commonProblems())];
    if (problems.length) throw new Error(problems.slice(0, 10).join('\n'));
  });
  const details = await fc.check(property, namedParams('https tls-rpt', REPORT_BATCHES));
  const error = (details.errorInstance as Error | undefined)?.message ?? '';
  t.false(details.failed, `seed ${details.seed}, path "${details.counterexamplePath}": ${error.slice(0, 6000)}`);
  const rows = await w.t0.app.store.db.selectFrom('tls_report_deliveries').select(['state']).where('policy_domain', 'like', '%.rpt.test').execute();
  t.log(`base seed ${baseSeed()}: ${n} batches, reports ${rows.filter((r) => r.state === 'sent').length} sent, ${rows.filter((r) => r.state === 'pending').length} pending, ${rows.filter((r) => r.state === 'failed').length} given up`);
});

test.serial('TLS-RPT: once the collector behaves, every pending report is sent', async (t) => {
  hostile.setAnswers([wellBehaved(200, 'ok')]);
  const pending = async () => (await w.t0.app.store.db.selectFrom('tls_report_deliveries').select('id').where('state', '=', 'pending').execute()).length;
  for (let i = 0; i < 10 && (await pending()) > 0; i++) {
    clock.advance(12 * 3_600_000);
    await w.t0.app.tlsReports.runNow();
  }
  t.is(await pending(), 0);
  const rows = await w.t0.app.store.db.selectFrom('tls_report_deliveries').select(['policy_domain', 'state', 'attempts']).where('policy_domain', 'like', '%.rpt.test').execute();
  for (const r of rows) t.true(r.state === 'sent' || (r.state === 'failed' && r.attempts === REPORT_RETRY_MINUTES.length + 1), `${r.policy_domain}: ${r.state} after ${r.attempts}`);
  t.deepEqual(await commonProblems(), []);
  // Memory is held to the clients' byte caps by commonProblems (no endless body read to
  // STREAM_CAP_BYTES); the RSS, which the hostile server's own megabyte answers swell and the
  // allocator need not give back, is only shown.
  t.log(`RSS grew by ${Math.round((process.memoryUsage().rss - rssBefore) / 1048576)} MB over the fuzz`);
});
