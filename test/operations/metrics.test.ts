import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { startTestApp } from '../helpers/test-app.js';
import { receiveOne } from '../inbound/helpers/smtp-client.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';

// GET /metrics scraped before and after a known workload: every counter moves by exactly what
// the workload did, by provider and outcome; the gauges read the queue, the connections and the
// store; the process defaults are there. And who may scrape.

const clock = new ManualClock(Date.UTC(2026, 10, 25, 12, 0, 0));
let w: MailWorld;
let receiver: WebhookReceiver;
let op: string;

/** Samples of the Prometheus text format: `name{a="b",...} value`, keyed by name and sorted labels. */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels = m[3] ? [...m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((l) => `${l[1]}=${l[2]}`).sort() : [];
    out.set(`${m[1]}{${labels.join(',')}}`, Number(m[4]));
  }
  return out;
}
const at = (m: Map<string, number>, key: string) => m.get(key) ?? 0;

async function scrape(key: string | null = null): Promise<Map<string, number>> {
  const res = await fetch(`${w.t0.baseUrl}/metrics`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  if (res.status !== 200) throw new Error(`${res.status} ${await res.text()}`);
  if (!/^text\/plain; version=0\.0\.4/.test(res.headers.get('content-type') ?? '')) throw new Error(`content type ${res.headers.get('content-type')}`);
  return parse(await res.text());
}

test.before(async () => {
  w = await startMailWorld({
    clock,
    overrides: { rateLimit: { perSecond: 1_000_000 }, webhooks: { allowPrivate: true } },
    sink: {
      onRcpt: (a) =>
        a.startsWith('nouser@')
          ? { code: 550, message: '5.1.1 user unknown' }
          : a.startsWith('slow@')
            ? { code: 451, message: '4.7.1 greylisted, try later' }
            : a.startsWith('policy@')
              ? { code: 550, message: '5.7.1 message refused by policy' }
              : undefined,
    },
  });
  w.addRecipientDomain('gmail.com');
  receiver = await startWebhookReceiver();
  op = (await w.t0.app.services.operatorKeys.create('prometheus')).token;
});
test.after.always(async () => {
  await w?.close();
  await receiver?.close();
});

test.serial('a known workload moves every counter by exactly what it did', async (t) => {
  const hook = await w.t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['email.delivered'] } });
  t.is(hook.status, 200);
  await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { receiving: true } });
  const before = await scrape();

  const to = ['a@gmail.com', 'b@gmail.com', 'nouser@gmail.com', 'c@example.net', 'slow@example.net', 'policy@example.net'];
  for (const rcpt of to) {
    const res = await w.t0.request('POST', '/v1/emails', { body: { from: `news@${w.domain.name}`, to: rcpt, subject: 'Hi', text: 'Hello' } });
    t.is(res.status, 200);
  }
  t.is((await w.t0.request('POST', '/v1/emails', { body: { from: `news@${w.domain.name}`, to: 'bad' } })).status, 400);
  await w.settle();
  await w.t0.app.webhookDispatcher.whenIdle();
  const inbound = await receiveOne(w.t0.app.listeners.inbound!.port, `inbox@${w.domain.name}`);
  t.true(inbound.ok, inbound.response);

  const after = await scrape();
  const delta = (key: string) => at(after, key) - at(before, key);
  t.is(delta('posthorn_messages_accepted_total{}'), 6);
  t.is(delta('posthorn_messages_delivered_total{provider=google,source=default}'), 2);
  t.is(delta('posthorn_messages_delivered_total{provider=other,source=default}'), 1);
  t.is(delta('posthorn_messages_bounced_total{provider=google,source=default,type=hard}'), 1);
  t.is(delta('posthorn_messages_bounced_total{provider=other,source=default,type=soft}'), 1);
  t.is(delta('posthorn_messages_deferred_total{provider=other,source=default}'), 1);
  t.is(delta('posthorn_messages_failed_total{provider=other,source=default}'), 0);
  t.is(delta('posthorn_delivery_latency_seconds_count{provider=google}'), 2);
  t.is(delta('posthorn_delivery_latency_seconds_count{provider=other}'), 1);
  t.is(delta('posthorn_http_requests_total{method=POST,route=/v1/emails,status=200}'), 6);
  t.is(delta('posthorn_http_requests_total{method=POST,route=/v1/emails,status=400}'), 1);
  t.is(delta('posthorn_http_request_duration_seconds_count{method=POST,route=/v1/emails}'), 7);
  t.is(delta('posthorn_webhook_calls_total{outcome=success}'), 3);
  t.is(delta('posthorn_inbound_messages_total{kind=received}'), 1);
  // Gauges: the deferred recipient waits in the queue; nothing is on the wire now.
  t.is(at(after, 'posthorn_queue_messages{provider=other,state=deferred}'), 1);
  t.is(at(after, 'posthorn_queue_messages{provider=google,state=ready}'), 0);
  t.true(at(after, 'posthorn_store_file_bytes{file=db}') > 0);
  t.true(after.has('posthorn_connections_open{provider=other}'));
  // Every body and message taken into the memory budgets was given back.
  for (const gauge of ['posthorn_message_memory_bytes', 'posthorn_messages_waiting_for_memory', 'posthorn_intake_memory_bytes', 'posthorn_intake_waiting', 'posthorn_receive_memory_bytes', 'posthorn_spooled_bodies']) {
    t.true(after.has(`${gauge}{}`), gauge);
    t.is(at(after, `${gauge}{}`), 0, gauge);
  }
  t.true(after.has('process_cpu_seconds_total{}'), 'process defaults');
  t.true(after.has('nodejs_heap_size_used_bytes{}'));
  // Route labels are templates, never ids.
  t.false([...after.keys()].some((k) => /route=[^,}]*em_/.test(k)));
});

test.serial('who may scrape: loopback or an operator key; a team key is refused', async (t) => {
  t.is((await fetch(`${w.t0.baseUrl}/metrics`, { headers: { authorization: `Bearer ${w.t0.key}` } })).status, 403);
  t.is((await fetch(`${w.t0.baseUrl}/metrics`, { headers: { authorization: 'Bearer ph_000000000000_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' } })).status, 401);
  t.true((await scrape(op)).size > 0);
  // Credentials of another scheme (Basic, meant for a proxy) are no key: from loopback the scrape
  // needs none and is not refused for them.
  for (const authorization of ['Basic cHJvbWV0aGV1czpzZWNyZXQ=', 'Digest username="prometheus"', 'Basic']) {
    const res = await fetch(`${w.t0.baseUrl}/metrics`, { headers: { authorization } });
    t.is(res.status, 200, authorization);
    t.regex(await res.text(), /^posthorn_messages_accepted_total /m);
  }
  // A forwarded address is not the connection's: it opens nothing.
  const closed = await startTestApp({ overrides: { metrics: { allowFrom: ['10.0.0.0/8'] } } });
  try {
    const anon = await fetch(`${closed.baseUrl}/metrics`, { headers: { 'x-forwarded-for': '10.1.2.3' } });
    t.is(anon.status, 401);
    t.is(((await anon.json()) as any).error.code, 'UNAUTHORIZED');
    // From an address outside allowFrom: Basic opens nothing, a Bearer that is no operator key is 401, a team key 403.
    t.is((await fetch(`${closed.baseUrl}/metrics`, { headers: { authorization: 'Basic cHJvbWV0aGV1czpzZWNyZXQ=' } })).status, 401);
    t.is((await fetch(`${closed.baseUrl}/metrics`, { headers: { authorization: 'Bearer ph_000000000000_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' } })).status, 401);
    t.is((await fetch(`${closed.baseUrl}/metrics`, { headers: { authorization: `Bearer ${closed.key}` } })).status, 403);
    const key = (await closed.app.services.operatorKeys.create('p')).token;
    t.is((await fetch(`${closed.baseUrl}/metrics`, { headers: { authorization: `Bearer ${key}` } })).status, 200);
  } finally {
    await closed.close();
  }
});

test.serial('behind a reverse proxy on this host, a client the proxy forwards needs a key: the proxy\'s loopback address opens nothing', async (t) => {
  // docs/operations.md's setup: nginx on the same machine, proxy_pass to 127.0.0.1, so every
  // connection is from loopback (in the default allowFrom), with the client in X-Forwarded-For.
  for (const trustProxy of [true, false]) {
    const proxied = await startTestApp({ overrides: { http: { trustProxy } } });
    try {
      const relayed: Record<string, string>[] = [{ 'x-forwarded-for': '203.0.113.9' }, { 'x-forwarded-for': '127.0.0.1, 203.0.113.9' }, { 'x-real-ip': '203.0.113.9' }, { forwarded: 'for=203.0.113.9' }];
      for (const headers of relayed) {
        const res = await fetch(`${proxied.baseUrl}/metrics`, { headers });
        t.is(res.status, 401, `trustProxy ${trustProxy}, ${JSON.stringify(headers)}`);
        t.is(((await res.json()) as any).error.code, 'UNAUTHORIZED');
      }
      const key = (await proxied.app.services.operatorKeys.create('p')).token;
      t.is((await fetch(`${proxied.baseUrl}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9', authorization: `Bearer ${key}` } })).status, 200);
      // A scraper on this host, straight to the listener, still needs none.
      t.is((await fetch(`${proxied.baseUrl}/metrics`)).status, 200);
    } finally {
      await proxied.close();
    }
  }
  // With trustProxy, the client the proxy names is what allowFrom checks: one inside it needs no key.
  const inside = await startTestApp({ overrides: { http: { trustProxy: true }, metrics: { allowFrom: ['127.0.0.1', '10.0.0.0/8'] } } });
  try {
    t.is((await fetch(`${inside.baseUrl}/metrics`, { headers: { 'x-forwarded-for': '10.1.2.3' } })).status, 200);
    t.is((await fetch(`${inside.baseUrl}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9' } })).status, 401);
  } finally {
    await inside.close();
  }
});
