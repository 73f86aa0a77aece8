import test from 'ava';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDnsZone } from '../helpers/dns-zone.js';
import { startSmtpSink } from '../helpers/smtp-sink.js';
import { startWebhookReceiver } from '../webhooks/webhook-receiver.js';
import { CrashObserver, publishDomainRecords } from './helpers/crash-observer.js';
import { apiClient, loopbackEnv, startPosthorn, type PosthornProcess } from './helpers/posthorn-process.js';
import { planRequests, postRequest, idsOf, sendPlan, type PlannedRequest } from './helpers/send-plan.js';

// Crash proof: `posthorn serve` is killed with SIGKILL twice while API sends, a campaign and
// webhook deliveries are all in flight, and restarted on the same data dir each time. Then:
// every email the API answered 200 for reached the MX, every campaign contact got exactly one
// campaign email, every delivered email's webhook event arrived (signed), the campaign finished
// with consistent counters, and idempotent retries after the restarts returned the same ids.
// Duplicates (a message or a webhook call re-sent because the kill came before its result was
// recorded) are allowed, at least once, and reported.

// Sized for about 90 s on a 2-core machine shared with other heavy jobs (~35 s when idle):
// 2,000 emails, 2,000 webhook events, three starts of the process.
const BATCHES = 14;
const BATCH_SIZE = 50;
const SINGLES = 700;
const API_MESSAGES = BATCHES * BATCH_SIZE + SINGLES;
const CONTACTS = 600;
/** Contacts per campaign batch; with a 0 s window one batch runs per runner tick (1 s): 12 ticks in all. */
const CAMPAIGN_BATCH = 50;
const SENDERS = 4;
/** Safety nets against a hang; every wait ends on an event long before on a healthy run. */
const PHASE_TIMEOUT_MS = 120_000;

const SENDER_DOMAIN = 'crash-proof.dev';
/** The campaign sends from its own domain, so the API can count its stored emails. */
const NEWS_DOMAIN = 'crash-news.dev';
const RCPT_DOMAIN = 'api-rcpt.example';
const BOOK_DOMAIN = 'book-rcpt.example';
const MX = 'mx.crash-proof.test';

test('SIGKILL twice with sends, a campaign and webhooks in flight: nothing accepted is lost, no contact is reached twice', async (t) => {
  t.timeout(300_000);
  const started = Date.now();
  const zone = await startDnsZone();
  let secret: string | undefined;
  const seen = new CrashObserver(() => secret);
  // No STARTTLS on the MX: TLS is not what this test is about, and it halves the CPU per message.
  const sink = await startSmtpSink({ hostname: MX, starttls: false, onData: (msg) => void seen.onSinkMessage(msg) });
  const receiver = await startWebhookReceiver();
  receiver.reply((call) => {
    seen.onWebhookCall(call);
    return { status: 200, body: 'ok' };
  });
  zone.set(MX, 'A', ['127.0.0.1']);
  for (const d of [RCPT_DOMAIN, BOOK_DOMAIN]) zone.set(d, 'MX', [{ exchange: MX, priority: 10 }]);

  const dir = mkdtempSync(join(tmpdir(), 'posthorn-crash-proof-'));
  const configFile = join(dir, 'posthorn.toml');
  // Campaign batches back to back (no window between them): the campaign queues over ~10 ticks.
  writeFileSync(configFile, '[campaigns]\nbatchWindowSeconds = 0\n');
  const env = loopbackEnv(
    { dataDir: join(dir, 'data'), dnsServer: zone.server, sinkPort: sink.port },
    { POSTHORN_RATE_LIMIT: '1000000', POSTHORN_WEBHOOKS_ALLOW_PRIVATE: 'true' },
  );
  let server: PosthornProcess = await startPosthorn({ env, configFile, expectKey: true });
  t.teardown(async () => {
    await server.kill();
    await Promise.all([sink.close(), zone.close(), receiver.close()]);
    rmSync(dir, { recursive: true, force: true });
  });
  const key = server.key!;
  t.truthy(key, 'the first start printed a key');
  const api = apiClient(() => server, key);
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await api(method, path, body);
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

  // ---- Set up like a user would, through the API.
  const domains: Record<string, any> = {};
  for (const name of [SENDER_DOMAIN, NEWS_DOMAIN]) {
    const domain = await ok('POST', '/v1/domains', { name, region: 'local' });
    publishDomainRecords(zone, domain);
    await ok('PUT', `/v1/domains/${domain.id}/verify`);
    domains[name] = await ok('GET', `/v1/domains/${domain.id}`);
    t.is(domains[name].status, 'SUCCESS', `${name} is verified`);
  }
  const book = await ok('POST', '/v1/contactBooks', { name: 'Crash book' });
  const contacts = Array.from({ length: CONTACTS }, (_, i) => `c${i}@${BOOK_DOMAIN}`);
  await ok('POST', `/v1/contactBooks/${book.id}/contacts/bulk`, contacts.map((email) => ({ email })));
  const hook = await ok('POST', '/v1/webhooks', { url: receiver.url, eventTypes: ['email.delivered'] });
  secret = hook.secret;
  const campaign = await ok('POST', '/v1/campaigns', {
    name: 'Crash campaign',
    from: `News <news@${NEWS_DOMAIN}>`,
    subject: 'Hello {{email}}',
    contactBookId: book.id,
    html: '<p>Campaign body</p>',
    batchSize: CAMPAIGN_BATCH,
  });
  const plan = planRequests({ batches: BATCHES, batchSize: BATCH_SIZE, singles: SINGLES, from: `Crash <send@${SENDER_DOMAIN}>`, rcptDomain: RCPT_DOMAIN });
  const count = (state: PlannedRequest['state']) => plan.filter((r) => r.state === state).length;
  const acceptedMessages = () => plan.reduce((n, r) => n + (r.state === 'accepted' ? r.ids!.length : 0), 0);
  const campaignAtSink = () => [...seen.idsByRecipient.keys()].filter((r) => r.endsWith(`@${BOOK_DOMAIN}`)).length;
  const snapshot = () =>
    `${elapsed()}: requests accepted ${count('accepted')}/${plan.length} (in flight ${count('inflight')}, cut ${count('cut')}), ` +
    `messages accepted ${acceptedMessages()}/${API_MESSAGES}, sink ${seen.sinkMessages} (campaign contacts ${campaignAtSink()}/${CONTACTS}), webhook calls ${seen.webhookCalls}`;
  const runs: string[] = [];
  /** Campaign emails stored so far (queued by its batches), counted by the API. */
  const campaignStored = async () => (await ok('GET', `/v1/emails?limit=1&domainId=${domains[NEWS_DOMAIN].id}`)).count as number;

  // ---- Phase 1: sends start; once they are being accepted, delivered and announced, the
  // campaign starts too; kill while all three are going and the campaign is queueing.
  let sending = sendPlan(api, plan, { concurrency: SENDERS, onAnswer: () => seen.tick() });
  await seen.until(
    () => count('accepted') >= plan.length / 10 && seen.sinkMessages >= 1 && seen.webhookCalls >= 1,
    () => `sends under way: ${snapshot()}`,
    PHASE_TIMEOUT_MS,
  );
  await ok('POST', `/v1/campaigns/${campaign.id}/schedule`, {});
  // Polls the store's count of campaign emails, once per progress event, until two batches are in.
  let queued1 = 0;
  while ((queued1 = await campaignStored()) < 2 * CAMPAIGN_BATCH) await once(seen.progress, 'tick');
  const atKill1 = snapshot();
  await server.kill();
  await sending;
  runs.push(`kill 1 at ${atKill1}, campaign emails stored ${queued1}/${CONTACTS}; ${count('cut')} requests cut`);
  t.true(queued1 < CONTACTS && count('accepted') < plan.length, 'the first kill came while the campaign was queueing and sends were being accepted');
  const sinkAtKill1 = seen.sinkMessages;
  const callsAtKill1 = seen.webhookCalls;

  // ---- Phase 2: restart; the client resends what was cut (same key when it had one); kill mid-delivery.
  server = await startPosthorn({ env, configFile });
  runs.push(`restart 1 at ${elapsed()}`);
  sending = sendPlan(api, plan, { concurrency: SENDERS, onAnswer: () => seen.tick() });
  await seen.until(
    () => seen.sinkMessages >= sinkAtKill1 + 300 && seen.webhookCalls >= callsAtKill1 + 150,
    () => `the second kill point: ${snapshot()}`,
    PHASE_TIMEOUT_MS,
  );
  const queued2 = await campaignStored();
  const atKill2 = snapshot();
  await server.kill();
  await sending;
  runs.push(`kill 2 at ${atKill2}, campaign emails stored ${queued2}/${CONTACTS}; ${count('cut')} requests cut`);
  t.true(seen.deliveries.size < API_MESSAGES + CONTACTS, 'the second kill came mid-delivery');

  // ---- Phase 3: restart and let everything settle.
  server = await startPosthorn({ env, configFile });
  runs.push(`restart 2 at ${elapsed()}`);
  t.true(await sendPlan(api, plan, { concurrency: SENDERS, onAnswer: () => seen.tick() }), 'every planned request was answered');
  const refused = plan.filter((r) => r.state === 'refused');
  t.deepEqual(
    refused.map((r) => ({ n: r.n, key: r.key, cuts: r.cuts, status: r.refusal!.status, body: r.refusal!.body })),
    [],
    'no request was refused (a retried key must not stay "in flight" after a restart)',
  );
  const accepted = new Map<string, string>(); // email id -> recipient
  for (const r of plan) r.ids?.forEach((id, i) => accepted.set(id, r.recipients[i]!));
  t.is(accepted.size, API_MESSAGES, 'one accepted email per planned message');

  const missingAtSink = () => [...accepted.keys()].filter((id) => !seen.deliveries.has(id));
  const campaignIds = () => contacts.flatMap((c) => [...(seen.idsByRecipient.get(c) ?? [])]);
  const missingEvents = () => [...accepted.keys(), ...campaignIds()].filter((id) => !seen.deliveredEvents.has(id));
  const settledAt: Record<string, string> = {};
  const mark = (name: string, done: boolean) => {
    if (done) settledAt[name] ??= elapsed();
    return done;
  };
  await seen.until(
    () => mark('api mail', missingAtSink().length === 0) && mark('campaign mail', campaignAtSink() === CONTACTS) && mark('webhook events', missingEvents().length === 0),
    () =>
      `everything to settle: ${snapshot()}; accepted emails not at the sink: ${missingAtSink().length} ` +
      `(e.g. ${missingAtSink().slice(0, 3).join(', ')}); delivered emails without a webhook event: ${missingEvents().length} ` +
      `(e.g. ${missingEvents().slice(0, 3).join(', ')})`,
    PHASE_TIMEOUT_MS,
  );

  // The campaign finishes and its counters catch up with the last status events.
  let view: any;
  const deadline = Date.now() + PHASE_TIMEOUT_MS;
  do view = await ok('GET', `/v1/campaigns/${campaign.id}`);
  while (!mark('campaign counters', view.status === 'SENT' && view.delivered >= CONTACTS && view.sent >= CONTACTS) && Date.now() < deadline);
  t.like(
    view,
    { status: 'SENT', total: CONTACTS, sent: CONTACTS, delivered: CONTACTS, bounced: 0, complained: 0 },
    'the campaign reached SENT with every contact counted once as sent and delivered',
  );

  // ---- Proofs.
  t.deepEqual(missingAtSink(), [], 'every email the API accepted was delivered');
  const reachedTwice = contacts.filter((c) => seen.idsByRecipient.get(c)?.size !== 1);
  t.deepEqual(reachedTwice, [], 'every campaign contact received exactly one campaign email (one email id)');
  t.is(new Set(campaignIds()).size, CONTACTS);
  t.deepEqual(missingEvents(), [], 'every delivered email had its email.delivered webhook event');
  t.is(seen.badSignatures, 0, 'every webhook call was signed with the endpoint secret');
  t.is(seen.unreadable, 0, 'every message carried its email id and every call an event id');
  // An email id nobody was answered for can only come from a request a kill cut.
  const cutRecipients = new Set(plan.filter((r) => r.cuts > 0).flatMap((r) => r.recipients));
  const orphans = [...seen.idsByRecipient].filter(([rcpt]) => rcpt.endsWith(`@${RCPT_DOMAIN}`)).flatMap(([rcpt, ids]) => [...ids].filter((id) => !accepted.has(id)).map((id) => ({ id, rcpt })));
  t.deepEqual(orphans.filter((o) => !cutRecipients.has(o.rcpt)), [], 'unanswered emails only come from cut requests');
  t.true(
    [...seen.deliveries.keys()].every((id) => accepted.has(id) || orphans.some((o) => o.id === id) || campaignIds().includes(id)),
    'the sink got nothing but accepted, cut or campaign emails',
  );

  // Idempotent retries after the restarts: the same key answers the same ids, nothing new is sent.
  const keyed = plan.filter((r) => r.key);
  const sinkBefore = seen.sinkMessages;
  let sameIds = 0;
  for (const r of keyed) {
    const res = await postRequest(api, r);
    if (res.status === 200 && JSON.stringify(idsOf(r, res)) === JSON.stringify(r.ids)) sameIds++;
  }
  t.is(sameIds, keyed.length, 'every keyed request replayed its original ids after the restarts');
  // Stored: the accepted ones, one per contact, and at most the messages of the cut requests.
  const stored = (await ok('GET', '/v1/emails?limit=1')).count as number;
  const cutMessages = plan.filter((r) => r.cuts > 0).reduce((n, r) => n + r.recipients.length * r.cuts, 0);
  t.true(stored >= accepted.size + CONTACTS && stored - accepted.size - CONTACTS <= cutMessages, `stored ${stored}: accepted + campaign + at most the ${cutMessages} cut messages`);
  t.is(seen.sinkMessages, sinkBefore, 'the replays sent nothing');

  const keyedCut = keyed.filter((r) => r.cuts > 0).length;
  runs.push(
    `settled at ${snapshot()}; done: ${Object.entries(settledAt).map(([k, v]) => `${k} ${v}`).join(', ')}`,
    `${plan.length} requests (${keyed.length} keyed), ${plan.filter((r) => r.cuts > 0).length} cut by a kill (${keyedCut} keyed), ${stored - accepted.size - CONTACTS} unanswered emails stored anyway (${orphans.length} reached the sink)`,
    `duplicates: ${seen.duplicateDeliveries()} deliveries of ${seen.deliveries.size} emails, ${seen.repeatedCalls()} repeated webhook calls, ${seen.extraDeliveredEvents()} extra delivered events, of ${seen.webhookCalls} calls`,
  );
  for (const line of runs) t.log(line);
});
