import test from 'ava';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { createMetrics } from '../../src/core/metrics/metrics.js';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { submissionTransport } from '../helpers/submission-client.js';
import { receiveOne } from '../inbound/helpers/smtp-client.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';

// Does GET /metrics tell the truth? A workload in which every outcome happens a known number of
// times, over the real protocols (HTTP API, SMTP submission, inbound SMTP, an SMTP sink as MX,
// webhook endpoints), then the real endpoint read as a scraper on loopback reads it: every
// documented series equals what happened, the queue gauges equal the store's queued rows, the
// text is valid exposition format, label values stay bounded, and what a restart does.

const HOUR = 3_600_000;
const clock = new ManualClock(Date.UTC(2026, 10, 25, 12, 0, 0));
let w: MailWorld;
let ok: WebhookReceiver;
let failing: WebhookReceiver;
let onceDeferred = false;

interface Family {
  name: string;
  type: string;
  samples: { name: string; labels: Record<string, string>; value: number }[];
}

/**
 * A strict reader of the Prometheus text format 0.0.4: HELP and TYPE once per family and before
 * its samples, a family's samples together, names and label names by the grammar, label values
 * with only \\ \" \n escapes, one sample per (name, labels).
 */
function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const help = new Set<string>();
  let current: Family | undefined;
  const familyOf = (sample: string) => {
    for (const suffix of ['_bucket', '_sum', '_count', '']) {
      const base = suffix && sample.endsWith(suffix) ? sample.slice(0, -suffix.length) : sample;
      const f = families.get(base);
      if (f && (suffix === '' || f.type === 'histogram' || f.type === 'summary')) return f;
    }
    return undefined;
  };
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a line feed');
  for (const line of text.slice(0, -1).split('\n')) {
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      const [, kind, name, rest] = meta as unknown as [string, string, string, string];
      if (kind === 'HELP') {
        if (help.has(name)) throw new Error(`HELP twice for ${name}`);
        help.add(name);
        if (/\\[^\\n]/.test(rest.replace(/\\\\/g, ''))) throw new Error(`bad escape in HELP of ${name}`);
      } else {
        if (families.has(name)) throw new Error(`TYPE twice for ${name}`);
        if (!['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest)) throw new Error(`bad TYPE ${rest}`);
        current = { name, type: rest, samples: [] };
        families.set(name, current);
      }
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: -?\d+)?$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const [, name, labelText, valueText] = m as unknown as [string, string, string | undefined, string];
    const family = familyOf(name);
    if (!family) throw new Error(`sample ${name} before its TYPE`);
    if (family !== current) throw new Error(`samples of ${family.name} are not together`);
    const labels: Record<string, string> = {};
    if (labelText !== undefined && labelText !== '') {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/y;
      let at = 0;
      while (at < labelText.length) {
        re.lastIndex = at;
        const l = re.exec(labelText);
        if (!l) throw new Error(`bad labels: ${labelText}`);
        if (l[1]! in labels) throw new Error(`label ${l[1]} twice`);
        labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
        at = re.lastIndex;
      }
    }
    const value = valueText === '+Inf' ? Infinity : valueText === '-Inf' ? -Infinity : valueText === 'NaN' ? NaN : Number(valueText);
    if (Number.isNaN(value) && valueText !== 'NaN') throw new Error(`bad value: ${line}`);
    family.samples.push({ name, labels, value });
  }
  for (const f of families.values()) {
    const keys = new Set<string>();
    for (const s of f.samples) {
      const key = `${s.name}${JSON.stringify(Object.entries(s.labels).sort())}`;
      if (keys.has(key)) throw new Error(`sample twice: ${key}`);
      keys.add(key);
    }
    if (f.type === 'counter') for (const s of f.samples) if (s.value < 0) throw new Error(`negative counter ${s.name}`);
    if (f.type === 'histogram') checkHistogram(f);
  }
  return families;
}

/** Per label set: ascending le buckets, cumulative, ending in +Inf, which equals _count; a _sum. */
function checkHistogram(f: Family): void {
  const groups = new Map<string, { buckets: [number, number][]; sum?: number; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    const g = groups.get(key) ?? { buckets: [] };
    groups.set(key, g);
    if (s.name === `${f.name}_bucket`) {
      if (le === undefined) throw new Error(`${f.name}_bucket without le`);
      g.buckets.push([le === '+Inf' ? Infinity : Number(le), s.value]);
    } else if (s.name === `${f.name}_sum`) g.sum = s.value;
    else if (s.name === `${f.name}_count`) g.count = s.value;
    else throw new Error(`${s.name} in histogram ${f.name}`);
  }
  for (const [key, g] of groups) {
    if (g.sum === undefined || g.count === undefined) throw new Error(`${f.name}${key}: no _sum or _count`);
    const last = g.buckets.at(-1);
    if (!last || last[0] !== Infinity) throw new Error(`${f.name}${key}: no +Inf bucket`);
    for (let i = 1; i < g.buckets.length; i++) {
      if (!(g.buckets[i]![0] > g.buckets[i - 1]![0])) throw new Error(`${f.name}${key}: le not ascending`);
      if (g.buckets[i]![1] < g.buckets[i - 1]![1]) throw new Error(`${f.name}${key}: buckets not cumulative`);
    }
    if (last[1] !== g.count) throw new Error(`${f.name}${key}: +Inf bucket ${last[1]} but _count ${g.count}`);
  }
}

interface Scrape {
  text: string;
  families: Map<string, Family>;
  /** A sample's value; 0 when absent. `labels` must name every label of the series. */
  v(name: string, labels?: Record<string, string>): number;
  has(name: string, labels?: Record<string, string>): boolean;
  /** Sum of a sample over every series whose labels include `labels`. */
  sum(name: string, labels?: Record<string, string>): number;
}

async function scrape(): Promise<Scrape> {
  // As documented: a scraper on loopback (metrics.allowFrom's default) needs no key.
  const res = await fetch(`${w.t0.baseUrl}/metrics`);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${res.status} ${text}`);
  const families = parseExposition(text);
  const samples = [...families.values()].flatMap((f) => f.samples);
  const match = (s: Family['samples'][number], name: string, labels: Record<string, string>, exact: boolean) =>
    s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v) && (!exact || Object.keys(s.labels).length === Object.keys(labels).length);
  const find = (name: string, labels: Record<string, string> = {}) => samples.find((s) => match(s, name, labels, true));
  return {
    text,
    families,
    v: (name, labels) => find(name, labels)?.value ?? 0,
    has: (name, labels) => find(name, labels) !== undefined,
    sum: (name, labels = {}) => samples.filter((s) => match(s, name, labels, false)).reduce((a, s) => a + s.value, 0),
  };
}

/** The store's own count of queued deliveries. */
async function queuedInStore(): Promise<number> {
  const r = await w.t0.app.store.db
    .selectFrom('deliveries')
    .select(sql<number>`count(*)`.as('n'))
    .where('state', '=', 'queued')
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

const send = (body: Record<string, unknown>, key?: string) => w.t0.request('POST', '/v1/emails', { body: { from: `news@${w.domain.name}`, subject: 'Hi', text: 'Hello', ...body }, key });

test.before(async () => {
  w = await startMailWorld({
    clock,
    overrides: { rateLimit: { perSecond: 1_000_000 }, webhooks: { allowPrivate: true } },
    sink: {
      onRcpt: (a) => {
        if (a.startsWith('nouser@')) return { code: 550, message: '5.1.1 user unknown' };
        if (a.startsWith('once@') && !onceDeferred) {
          onceDeferred = true;
          return { code: 451, message: '4.7.1 greylisted, try later' };
        }
        return undefined;
      },
    },
  });
  w.addRecipientDomain('gmail.com');
  ok = await startWebhookReceiver();
  failing = await startWebhookReceiver();
  failing.reply(() => ({ status: 500, body: 'down' }));
});
test.after.always(async () => {
  await w?.close();
  await ok?.close();
  await failing?.close();
});

test.serial('every documented series equals what the workload did, and the queue gauges equal the store', async (t) => {
  t.is((await w.t0.request('POST', '/v1/webhooks', { body: { url: ok.url, eventTypes: ['email.delivered'] } })).status, 200);
  t.is((await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { receiving: true } })).status, 200);
  t.is((await w.t0.request('POST', '/v1/suppressions', { body: { email: 'gone@example.net', reason: 'MANUAL' } })).status, 200);
  const before = await scrape();
  const http = (method: string, route: string, status: number) => ['posthorn_http_requests_total', { method, route, status: String(status) }] as const;
  const delta = (name: string, labels?: Record<string, string>) => after.v(name, labels) - before.v(name, labels);
  let after = before;

  // Phase 1, at t0: five API sends, a batch of two, one through SMTP submission.
  for (const to of ['a@example.net', 'b@gmail.com', 'once@example.net', 'gone@example.net']) t.is((await send({ to })).status, 200, to);
  const later = await send({ to: 'later@example.net', scheduledAt: new Date(clock.nowMs() + HOUR).toISOString() });
  t.is(later.status, 200);
  const batch = await w.t0.request('POST', '/v1/emails/batch', { body: ['c@example.net', 'd@example.net'].map((to) => ({ from: `news@${w.domain.name}`, to, subject: 'Hi', text: 'Hello' })) });
  t.is(batch.status, 200);
  await submissionTransport(w.t0).sendMail({ from: `news@${w.domain.name}`, to: 'e@example.net', subject: 'By SMTP', text: 'Hello' });
  // Refused: 400 (no recipient), 401 (no key), 429 (a team allowed one request a second: the clock stands still).
  t.is((await send({ to: 'bad' })).status, 400);
  t.is((await w.t0.request('GET', '/v1/domains', { key: null })).status, 401);
  const slowTeam = await w.t0.app.services.teams.create('Slow', 1);
  const slowKey = (await w.t0.app.services.apiKeys.create(slowTeam, { name: 'slow', permission: 'FULL' })).token;
  t.is((await w.t0.request('GET', '/v1/domains', { key: slowKey })).status, 200);
  t.is((await w.t0.request('GET', '/v1/domains', { key: slowKey })).status, 429);
  await w.settle();
  await w.t0.app.webhookDispatcher.whenIdle();

  after = await scrape();
  t.is(delta('posthorn_messages_accepted_total'), 8, 'five API sends (one SUPPRESSED at acceptance, one scheduled), a batch of two, one submission');
  t.is(after.v('posthorn_messages_delivered_total', { provider: 'other', source: 'default' }), 4, 'a, c, d, e');
  t.is(after.v('posthorn_messages_delivered_total', { provider: 'google', source: 'default' }), 1);
  t.is(after.v('posthorn_messages_deferred_total', { provider: 'other', source: 'default' }), 1);
  t.is(after.sum('posthorn_messages_bounced_total'), 0);
  t.is(after.sum('posthorn_messages_failed_total'), 0);
  t.is(after.v('posthorn_messages_suppressed_total'), 0, 'suppressed at acceptance is not suppressed at delivery');
  t.is(after.v('posthorn_delivery_latency_seconds_count', { provider: 'other' }), 4);
  t.is(after.v('posthorn_delivery_latency_seconds_sum', { provider: 'other' }), 0, 'the clock has not moved');
  t.is(after.v('posthorn_webhook_calls_total', { outcome: 'success' }), 5);
  t.is(ok.calls.length, 5);
  t.is(delta(...http('POST', '/v1/emails', 200)), 5);
  t.is(delta(...http('POST', '/v1/emails', 400)), 1);
  t.is(delta(...http('POST', '/v1/emails/batch', 200)), 1);
  t.is(delta(...http('GET', '/v1/domains', 401)), 1);
  t.is(delta(...http('GET', '/v1/domains', 200)), 1);
  t.is(delta(...http('GET', '/v1/domains', 429)), 1);
  t.is(delta('posthorn_http_request_duration_seconds_count', { method: 'POST', route: '/v1/emails' }), 6);
  // The queue: once@ waits for its retry, later@ for its time; nothing on the wire.
  t.is(after.v('posthorn_queue_messages', { state: 'deferred', provider: 'other' }), 1);
  t.is(after.v('posthorn_queue_messages', { state: 'scheduled', provider: 'other' }), 1);
  t.is(after.sum('posthorn_queue_messages'), await queuedInStore());
  t.is(await queuedInStore(), 2);
  t.true(after.has('posthorn_connections_open', { provider: 'other' }));

  // Phase 2, an hour on: once@ is delivered on its retry; later@ was suppressed meanwhile.
  t.is((await w.t0.request('POST', '/v1/suppressions', { body: { email: 'later@example.net', reason: 'MANUAL' } })).status, 200);
  clock.advance(HOUR + 1000);
  await w.settle();
  await w.t0.app.webhookDispatcher.whenIdle();
  // Phase 3: a webhook endpoint that fails, told of a hard bounce; a message received.
  t.is((await w.t0.request('POST', '/v1/webhooks', { body: { url: failing.url, eventTypes: ['email.bounced'] } })).status, 200);
  t.is((await send({ to: 'nouser@example.net' })).status, 200);
  await w.settle();
  await w.t0.app.webhookDispatcher.whenIdle();
  const inbound = await receiveOne(w.t0.app.listeners.inbound!.port, `inbox@${w.domain.name}`);
  t.true(inbound.ok, inbound.response);

  after = await scrape();
  t.is(delta('posthorn_messages_accepted_total'), 9);
  t.is(after.v('posthorn_messages_delivered_total', { provider: 'other', source: 'default' }), 5, 'once@ on its retry');
  t.is(after.v('posthorn_messages_deferred_total', { provider: 'other', source: 'default' }), 1);
  t.is(after.v('posthorn_messages_bounced_total', { provider: 'other', source: 'default', type: 'hard' }), 1);
  t.is(after.sum('posthorn_messages_bounced_total'), 1);
  t.is(after.v('posthorn_messages_suppressed_total'), 1, 'later@, suppressed after acceptance');
  t.is(after.sum('posthorn_messages_failed_total'), 0);
  t.is(after.v('posthorn_delivery_latency_seconds_count', { provider: 'other' }), 5);
  t.is(after.v('posthorn_delivery_latency_seconds_sum', { provider: 'other' }), (HOUR + 1000) / 1000, "once@'s wait");
  t.is(after.v('posthorn_delivery_latency_seconds_count', { provider: 'google' }), 1);
  t.is(after.v('posthorn_webhook_calls_total', { outcome: 'success' }), 6);
  t.is(ok.calls.length, 6);
  t.is(after.v('posthorn_webhook_calls_total', { outcome: 'http_5xx' }), 1);
  t.is(failing.calls.length, 1);
  t.is(after.v('posthorn_inbound_messages_total', { kind: 'received' }), 1);
  t.is(after.sum('posthorn_queue_messages'), await queuedInStore());
  t.is(await queuedInStore(), 0);
  for (const gauge of ['posthorn_message_memory_bytes', 'posthorn_messages_waiting_for_memory', 'posthorn_intake_memory_bytes', 'posthorn_intake_waiting', 'posthorn_receive_memory_bytes', 'posthorn_spooled_bodies']) {
    t.true(after.has(gauge), gauge);
    t.is(after.v(gauge), 0, gauge);
  }
  t.true(after.v('posthorn_store_file_bytes', { file: 'db' }) > 0);
});

test.serial('label values stay bounded: ids, addresses, keys and hostile input never become a series', async (t) => {
  const probe = async (token: string) => {
    for (const path of [`/v1/emails/em_${token}`, `/api/v1/emails/em_${token}`, `/v1/${token}`, `/v1/contactBooks/${token}/contacts/${token}`, `/console/${token}`, `/${token}`, `/unsubscribe/${token}`]) {
      await fetch(`${w.t0.baseUrl}${path}`, { headers: { authorization: `Bearer ${w.t0.key}` } });
    }
    // A hostile recipient domain (its MX the sink), a display name, a webhook URL path.
    w.addRecipientDomain(`${token}.example`);
    t.is((await send({ from: `"${token} \\"x\\"" <news@${w.domain.name}>`, to: `${token}@${token}.example` })).status, 200);
    await w.settle();
  };
  await probe(randomBytes(6).toString('hex'));
  const first = await scrape();
  const series = (s: Scrape) => [...s.families.values()].filter((f) => f.name.startsWith('posthorn_')).reduce((n, f) => n + f.samples.length, 0);
  const token = randomBytes(6).toString('hex');
  await probe(token);
  const second = await scrape();
  t.is(series(second), series(first), 'a second round of new ids and names made no new series');
  t.false(second.text.includes(token));
  const keyId = w.t0.key.split('_')[1]!;
  const values = [...second.families.values()].flatMap((f) => f.samples.flatMap((s) => Object.values(s.labels)));
  for (const value of values) {
    t.false(value.includes('@'), value);
    t.false(/\bem_|\bph_/.test(value), value);
    t.false(value.includes(keyId), value);
  }
});

test.serial('counters are per process: a restart on the same store starts them at zero; the gauges read the store', async (t) => {
  const before = await scrape();
  t.true(before.v('posthorn_messages_accepted_total') > 0);
  await w.restart({ sandbox: true });
  const fresh = await scrape();
  t.is(fresh.v('posthorn_messages_accepted_total'), 0);
  t.is(fresh.sum('posthorn_messages_delivered_total'), 0);
  t.is(fresh.sum('posthorn_queue_messages'), await queuedInStore());
  // A sandbox send: captured, counted as delivered like any other.
  t.is((await send({ to: 'sandboxed@example.net' })).status, 200);
  await w.settle();
  const after = await scrape();
  t.is(after.v('posthorn_messages_accepted_total'), 1);
  t.is(after.v('posthorn_messages_delivered_total', { provider: 'other', source: 'default' }), 1);
  t.is(after.v('posthorn_delivery_latency_seconds_count', { provider: 'other' }), 1);
});

test('a value not yet known is written NaN, as the format spells it (prom-client writes "Nan")', async (t) => {
  // Just made, the event-loop delay monitor has no sample: its mean is NaN.
  const metrics = createMetrics({
    queue: async () => [],
    connections: () => new Map(),
    storeFiles: async () => ({ db: 1, wal: 0 }),
    messageMemory: () => ({ bytes: 0, waiting: 0 }),
    intakeMemory: () => ({ bytes: 0, waiting: 0, receiving: 0, spooled: 0 }),
    port25Blocked: () => false,
  });
  const text = await metrics.render();
  t.regex(text, /^nodejs_eventloop_lag_mean_seconds NaN$/m);
  t.notThrows(() => parseExposition(text));
});
