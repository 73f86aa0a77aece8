import test from 'ava';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDnsZone } from '../helpers/dns-zone.js';
import { startSmtpSink } from '../helpers/smtp-sink.js';
import { startWebhookReceiver, verifySignature, type ReceivedCall } from '../webhooks/webhook-receiver.js';
import { publishDomainRecords } from './helpers/crash-observer.js';
import { apiClient, loopbackEnv, startPosthorn, type PosthornProcess } from './helpers/posthorn-process.js';

// The transactional webhook outbox, proven with real kills. A child process (the app as
// `posthorn serve` builds it) SIGKILLs itself on the first bus event of a given type: right
// after the state change that event reports has committed, before any after-commit handler
// runs. Before the outbox rows were written in the state change's own transaction, that kill
// lost the webhook event for good (the email was QUEUED / DELIVERED, the endpoint never told).
//
// Run 1 dies on email.queued (the API send's commit), run 2 on email.delivered (the delivery
// result's commit, made by the group-committed hot path), run 3 runs on. Checked: after each
// kill the outbox rows are on disk, and in the end the endpoint got both events for the email,
// signed, and any re-send of an event carried the same event id.

const CHILD = fileURLToPath(new URL('./helpers/kill-in-window-child.js', import.meta.url));
const SENDER_DOMAIN = 'outbox-kill.dev';
const RCPT_DOMAIN = 'outbox-rcpt.example';
const MX = 'mx.outbox-kill.test';
/** A safety net against a hang only; a healthy run gets both events within a second or two. */
const DELIVERY_TIMEOUT_MS = 60_000;

/** A request that must answer 200; its body. */
function okFor(api: ReturnType<typeof apiClient>) {
  return async (method: string, path: string, body?: unknown) => {
    const res = await api(method, path, body);
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
}

test('a SIGKILL right after a status commit loses no webhook event: the outbox rows committed with it', async (t) => {
  t.timeout(120_000);
  const zone = await startDnsZone();
  const sink = await startSmtpSink({ hostname: MX, starttls: false });
  const receiver = await startWebhookReceiver();
  zone.set(MX, 'A', ['127.0.0.1']);
  zone.set(RCPT_DOMAIN, 'MX', [{ exchange: MX, priority: 10 }]);
  const dir = mkdtempSync(join(tmpdir(), 'posthorn-outbox-kill-'));
  const dataDir = join(dir, 'data');
  const env = loopbackEnv({ dataDir, dnsServer: zone.server, sinkPort: sink.port }, { POSTHORN_WEBHOOKS_ALLOW_PRIVATE: 'true' });
  let server: PosthornProcess = await startPosthorn({ script: CHILD, env: { ...env, POSTHORN_TEST_KILL_ON: 'email.queued' }, expectKey: true });
  t.teardown(async () => {
    await server.kill();
    await Promise.all([sink.close(), zone.close(), receiver.close()]);
    rmSync(dir, { recursive: true, force: true });
  });
  const key = server.key!;
  const api = apiClient(() => server, key);
  const ok = okFor(api);

  const domain = await ok('POST', '/v1/domains', { name: SENDER_DOMAIN, region: 'local' });
  publishDomainRecords(zone, domain);
  await ok('PUT', `/v1/domains/${domain.id}/verify`);
  const hook = await ok('POST', '/v1/webhooks', { url: receiver.url, eventTypes: ['email.queued', 'email.delivered'] });
  const secret = hook.secret as string;

  /** The outbox rows on disk (read while no process runs), per event type, for the one email. */
  const outboxOnDisk = () => {
    const db = new Database(join(dataDir, 'posthorn.db'));
    try {
      const emails = db.prepare('select id, latest_status from emails').all() as { id: string; latest_status: string }[];
      const events = db
        .prepare('select e.id, e.type, e.body, count(c.id) as calls from webhook_events e left join webhook_calls c on c.event_id = e.id group by e.id')
        .all() as { id: string; type: string; body: string; calls: number }[];
      return { emails, events: events.map((e) => ({ ...e, emailId: (JSON.parse(e.body) as { data: { id: string } }).data.id })) };
    } finally {
      db.close();
    }
  };

  /** The analytics rollups on disk. */
  const rollupsOnDisk = () => {
    const db = new Database(join(dataDir, 'posthorn.db'));
    try {
      return db.prepare('select coalesce(sum(sent), 0) as sent, coalesce(sum(delivered), 0) as delivered from email_daily_stats').get() as { sent: number; delivered: number };
    } finally {
      db.close();
    }
  };

  // ---- Run 1: the send commits, the process dies before anything after the commit runs.
  const send = await api('POST', '/v1/emails', { from: `Kill <send@${SENDER_DOMAIN}>`, to: `rcpt@${RCPT_DOMAIN}`, subject: 'Outbox', text: 'hello' }).then(
    (res) => `answered ${res.status}`,
    () => 'cut',
  );
  t.is(await server.exited, null, 'run 1 was killed by a signal');
  t.regex(server.output(), /killing myself on email\.queued/);
  t.is(send, 'cut', 'the kill came before the API answered');
  const afterRun1 = outboxOnDisk();
  t.is(afterRun1.emails.length, 1, 'the send committed before the kill');
  const emailId = afterRun1.emails[0]!.id;
  t.is(afterRun1.emails[0]!.latest_status, 'QUEUED');
  t.deepEqual(
    afterRun1.events.filter((e) => e.emailId === emailId).map((e) => [e.type, e.calls]),
    [['email.queued', 1]],
    'the email.queued outbox row (and its call) committed with the email itself',
  );

  // ---- Run 2: the restart delivers the email; it dies right after the DELIVERED result commits.
  server = await startPosthorn({ script: CHILD, env: { ...env, POSTHORN_TEST_KILL_ON: 'email.delivered' } });
  t.is(await server.exited, null, 'run 2 was killed by a signal');
  t.regex(server.output(), new RegExp(`killing myself on email\\.delivered of ${emailId}`));
  t.is(sink.messages.length, 1, 'the MX got the email once before the kill');
  const afterRun2 = outboxOnDisk();
  t.is(afterRun2.emails[0]!.latest_status, 'DELIVERED', 'the delivery result committed before the kill');
  const delivered = afterRun2.events.filter((e) => e.emailId === emailId && e.type === 'email.delivered');
  t.is(delivered.length, 1, 'the email.delivered outbox row committed with the delivery result');
  t.deepEqual(rollupsOnDisk(), { sent: 1, delivered: 1 }, 'and so did its analytics counts (they were buffered in memory and lost)');
  if (delivered.length !== 1 || afterRun1.events.length === 0) return; // lost for good: run 3 would only wait

  // ---- Run 3: nothing killed; the dispatcher sends what the outbox holds.
  server = await startPosthorn({ script: CHILD, env });
  const of = (type: string) => receiver.calls.filter((c) => c.json?.type === type && c.json?.data?.id === emailId);
  let gaveUp = false;
  const safetyNet = new Promise<void>((resolve) => setTimeout(() => resolve(void (gaveUp = true)), DELIVERY_TIMEOUT_MS).unref());
  // Waits for calls to arrive (event-driven), not for time.
  while (!(of('email.queued').length && of('email.delivered').length) && !gaveUp) {
    await Promise.race([receiver.waitFor(receiver.calls.length + 1), server.exited, safetyNet]);
  }
  const check = (type: string, calls: ReceivedCall[], storedId: string | undefined) => {
    t.true(calls.length >= 1, `${type} reached the endpoint (at least once)`);
    t.true(
      calls.every((c) => verifySignature(secret, c)),
      `every ${type} call is signed with the endpoint's secret`,
    );
    t.deepEqual([...new Set(calls.map((c) => c.json.id))], [storedId], `every ${type} call carries the one event id stored in the outbox`);
    t.true(
      calls.every((c) => c.headers['x-service-event-id'] === storedId),
      'and names it in X-Service-Event-Id',
    );
  };
  check('email.queued', of('email.queued'), afterRun1.events.find((e) => e.type === 'email.queued')?.id);
  check('email.delivered', of('email.delivered'), delivered[0]!.id);
  t.is(sink.messages.length, 1, 'the email itself was not sent again');
  t.like((await ok('GET', `/v1/emails/${emailId}`)) as object, { latestStatus: 'DELIVERED' });
});

test('a SIGKILL right after a contact or domain write loses no webhook event either', async (t) => {
  t.timeout(120_000);
  const zone = await startDnsZone();
  const receiver = await startWebhookReceiver();
  const dir = mkdtempSync(join(tmpdir(), 'posthorn-outbox-kill-'));
  const dataDir = join(dir, 'data');
  const env = loopbackEnv({ dataDir, dnsServer: zone.server, sinkPort: 1 }, { POSTHORN_WEBHOOKS_ALLOW_PRIVATE: 'true' });
  let server: PosthornProcess = await startPosthorn({ script: CHILD, env: { ...env, POSTHORN_TEST_KILL_ON: 'contact.created' }, expectKey: true });
  t.teardown(async () => {
    await server.kill();
    await Promise.all([zone.close(), receiver.close()]);
    rmSync(dir, { recursive: true, force: true });
  });
  const key = server.key!;
  const api = apiClient(() => server, key);
  const ok = okFor(api);
  const domain = await ok('POST', '/v1/domains', { name: 'outbox-domain.dev', region: 'local' });
  const book = await ok('POST', '/v1/contactBooks', { name: 'Outbox' });
  const hook = await ok('POST', '/v1/webhooks', { url: receiver.url, eventTypes: ['contact.created', 'domain.updated'] });
  const stored = (type: string) => {
    const db = new Database(join(dataDir, 'posthorn.db'));
    try {
      return (db.prepare('select e.id, count(c.id) as calls from webhook_events e join webhook_calls c on c.event_id = e.id where e.type = ? group by e.id').all(type) as { id: string; calls: number }[]);
    } finally {
      db.close();
    }
  };

  // ---- Run 1 dies right after the contact's commit, before any after-commit handler.
  const added = await api('POST', `/v1/contactBooks/${book.id}/contacts`, { email: 'kill@example.com' }).then(
    (res) => `answered ${res.status}`,
    () => 'cut',
  );
  t.is(await server.exited, null, 'run 1 was killed by a signal');
  t.is(added, 'cut');
  const contactEvents = stored('contact.created');
  t.is(contactEvents.length, 1, 'the contact.created outbox row (and its call) committed with the contact');

  // ---- Run 2 dies right after a domain change commits.
  server = await startPosthorn({ script: CHILD, env: { ...env, POSTHORN_TEST_KILL_ON: 'domain.updated' } });
  const patched = await api('PATCH', `/v1/domains/${domain.id}`, { clickTracking: true }).then(
    (res) => `answered ${res.status}`,
    () => 'cut',
  );
  t.is(await server.exited, null, 'run 2 was killed by a signal');
  t.is(patched, 'cut');
  const domainEvents = stored('domain.updated');
  t.is(domainEvents.length, 1, 'the domain.updated outbox row committed with the change');
  if (contactEvents.length !== 1 || domainEvents.length !== 1) return;

  // ---- Run 3: the dispatcher sends both, each with the event id stored before the kill.
  server = await startPosthorn({ script: CHILD, env });
  const of = (type: string) => receiver.calls.filter((c) => c.json?.type === type);
  let gaveUp = false;
  const safetyNet = new Promise<void>((resolve) => setTimeout(() => resolve(void (gaveUp = true)), DELIVERY_TIMEOUT_MS).unref());
  while (!(of('contact.created').length && of('domain.updated').length) && !gaveUp) {
    await Promise.race([receiver.waitFor(receiver.calls.length + 1), server.exited, safetyNet]);
  }
  t.deepEqual([...new Set(of('contact.created').map((c) => c.json.id))], [contactEvents[0]!.id]);
  t.is(of('contact.created')[0]?.json.data.email, 'kill@example.com');
  t.deepEqual([...new Set(of('domain.updated').map((c) => c.json.id))], [domainEvents[0]!.id]);
  t.true([...of('contact.created'), ...of('domain.updated')].every((c) => verifySignature(hook.secret as string, c)));
  t.like((await ok('GET', `/v1/domains/${domain.id}`)) as object, { clickTracking: true });
});
