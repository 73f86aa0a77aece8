import test from 'ava';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';

// SENT tells the truth (architecture.md, Decisions: email status): it is recorded for the
// first attempt in which a remote server took part, a mail transaction begun on it. A message
// that never left (no such domain, a null MX, no server reachable) has no SENT.

let w: MailWorld;
let receiver: WebhookReceiver;

test.before(async () => {
  receiver = await startWebhookReceiver();
  w = await startMailWorld({ overrides: { webhooks: { allowPrivate: true } } });
  await w.t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['email.sent', 'email.bounced', 'email.delivery_delayed'] } });
});
test.after.always(async () => {
  await w?.close();
  await receiver?.close();
});

async function statusesOf(emailId: string): Promise<string[]> {
  await w.settle();
  return (await w.t0.request('GET', `/v1/emails/${emailId}`)).body.emailEvents.map((e: any) => e.status);
}

async function send(to: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to }) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId;
}

test.serial('a domain that does not exist: QUEUED -> BOUNCED with the reason, never SENT, and nothing reached the sink', async (t) => {
  const connections = w.sink.connectionCount;
  const id = await send('someone@no-such-domain-at-all.example');
  t.deepEqual(await statusesOf(id), ['QUEUED', 'BOUNCED']);
  const email = (await w.t0.request('GET', `/v1/emails/${id}`)).body;
  t.is(email.latestStatus, 'BOUNCED');
  const bounce = email.emailEvents[1].data;
  t.regex(bounce.response, /does not exist/);
  t.is(bounce.bounce.type, 'Permanent');
  t.is(w.sink.connectionCount, connections);
  await w.t0.app.webhookDispatcher.whenIdle();
  t.false(receiver.calls.some((c) => c.json.type === 'email.sent' && c.json.data.id === id), 'no email.sent webhook');
  t.true(receiver.calls.some((c) => c.json.type === 'email.bounced' && c.json.data.id === id));
});

test.serial('a null MX: QUEUED -> BOUNCED, never SENT', async (t) => {
  w.zone.set('nomail.example', 'MX', [{ exchange: '.', priority: 0 }]);
  t.deepEqual(await statusesOf(await send('x@nomail.example')), ['QUEUED', 'BOUNCED']);
});

test.serial('MX hosts that do not exist (NXDOMAIN): QUEUED -> BOUNCED at once, not delayed for days; a host that fails to resolve for now beside one is only delayed', async (t) => {
  w.zone.set('typo-mx.example', 'MX', [{ exchange: 'mx.no-such-host.example', priority: 10 }]);
  const id = await send('x@typo-mx.example');
  t.deepEqual(await statusesOf(id), ['QUEUED', 'BOUNCED']);
  const bounce = (await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents[1].data;
  t.regex(bounce.response, /no MX host exists \(mx\.no-such-host\.example: .*NXDOMAIN/);
  t.is(bounce.bounce.type, 'Permanent');
  w.zone.set('flaky-mx.example', 'MX', [{ exchange: 'mx.no-such-host.example', priority: 10 }, { exchange: 'mx.flaky-mx.example', priority: 20 }]);
  w.zone.servfail('mx.flaky-mx.example');
  t.deepEqual(await statusesOf(await send('y@flaky-mx.example')), ['QUEUED', 'DELIVERY_DELAYED']);
});

test.serial('no server reachable (connection refused): DELIVERY_DELAYED without SENT', async (t) => {
  // An MX on a loopback address where nothing listens on the outbound port.
  w.zone.set('mx.refusing.example', 'A', ['127.0.0.9']);
  w.zone.set('refusing.example', 'MX', [{ exchange: 'mx.refusing.example', priority: 10 }]);
  const id = await send('x@refusing.example');
  t.deepEqual(await statusesOf(id), ['QUEUED', 'DELIVERY_DELAYED']);
});

test.serial('a remote server refused the recipient: SENT (the server took part) then BOUNCED', async (t) => {
  w.sink.setBehaviour({ onRcpt: () => ({ code: 550, message: '5.1.1 <gone@example.net>: user unknown' }) });
  try {
    t.deepEqual(await statusesOf(await send('gone@example.net')), ['QUEUED', 'SENT', 'BOUNCED']);
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
});

test.serial('a message larger than the SIZE the server announced: refused before MAIL FROM, so BOUNCED without SENT', async (t) => {
  // RFC 1870: with SIZE in the EHLO reply the client does not even offer a larger message; no
  // mail transaction began, so the server did not take part in one.
  const small = await w.startSecondSink('small.example', { size: 100 });
  const id = await send('x@small.example');
  t.deepEqual(await statusesOf(id), ['QUEUED', 'BOUNCED']);
  t.is(small.messages.length, 0);
  await w.t0.app.webhookDispatcher.whenIdle();
  t.false(receiver.calls.some((c) => c.json.type === 'email.sent' && c.json.data.id === id), 'no email.sent webhook');
});

test.serial('delivered: QUEUED -> SENT -> DELIVERED', async (t) => {
  t.deepEqual(await statusesOf(await send('fine@example.net')), ['QUEUED', 'SENT', 'DELIVERED']);
});
