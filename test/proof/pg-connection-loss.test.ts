import { Writable } from 'node:stream';
import test from 'ava';
import pg from 'pg';
import { pino } from 'pino';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { createTestDatabase, dropTestDatabase, pgAdminUrl } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { seedFor } from './helpers/fuzz-config.js';

// Connection loss on PostgreSQL: the server stays up, but a node's sessions are ended under it
// (pg_terminate_backend from a superuser connection, the node's sessions picked by their
// application_name, "posthorn <node>") at moments a seeded generator chooses while two nodes
// on one database take API sends (plain, with an Idempotency-Key, scheduled), run a campaign,
// deliver to an SMTP sink and call a webhook. A cut lands wherever the node was: in a group
// commit, a claim, a results write, a webhook attempt's record, a campaign batch. Then:
//   - nothing crashed (an unhandled rejection fails the ava worker); every answer is a 2xx or
//     the documented 500 "not stored, retry later"; /health answers 200 by itself afterwards;
//   - every send answered 200 reaches the MX exactly once (the MX is healthy: no SMTP-forced
//     repeat); a send answered 500 was not stored, and a keyed one retried is one email;
//   - no second SMTP send because a result write died with its connection; every webhook event
//     is acknowledged, and the receiver got exactly as many requests as attempts are recorded;
//   - new sends go through on both nodes without restarting anything.
// FUZZ_SEED replays or varies the schedule (helpers/fuzz-config.ts); CONNLOSS_REQUESTS and
// CONNLOSS_CUTS make the run longer.

const REQUESTS = Number(process.env.CONNLOSS_REQUESTS ?? 240);
const CUTS = Number(process.env.CONNLOSS_CUTS ?? 40);
const SENDERS = 6;
const CONTACTS = 40;
const NOT_STORED = /could not store this request .*nothing was accepted, retry later/;
const NODES = ['conn-a', 'conn-b'] as const;
const appName = (node: string) => `posthorn ${node}`;

/** mulberry32: a small seeded PRNG (the schedule must replay from its seed). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A logger that keeps each node's warn and error lines (the report says what the cuts broke). */
function keptLogger(node: string, lines: { node: string; msg: string; err?: string }[]) {
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
        const o = JSON.parse(line) as { msg: string; err?: { message?: string } | string };
        lines.push({ node, msg: o.msg, err: typeof o.err === 'string' ? o.err : o.err?.message });
      }
      done();
    },
  });
  return pino({ level: 'warn' }, stream);
}

type Kind = 'plain' | 'keyed' | 'scheduled';
interface Req {
  i: number;
  kind: Kind;
  node: number;
  key?: string;
  body: Record<string, unknown>;
  /** Every answer, in order. */
  answers: { status: number; body: any }[];
  emailId?: string;
}

const clock = new ManualClock(Date.UTC(2026, 10, 29, 9, 0, 0));
let url: string;
let w: MailWorld;
let b: TestApp;
let hook: WebhookReceiver;
let admin: pg.Client;
/** Messages at the MX feed the cutter's progress. */
let onSinkMessage: () => void = () => undefined;
const logLines: { node: string; msg: string; err?: string }[] = [];

test.before(async () => {
  url = await createTestDatabase();
  const shared = {
    store: { url },
    campaigns: { batchWindowSeconds: 0 },
    webhooks: { allowPrivate: true },
    rateLimit: { perSecond: 1_000_000 },
  };
  w = await startMailWorld({ clock, sink: { onData: () => (onSinkMessage(), undefined) }, overrides: { ...shared, cluster: { nodeName: NODES[0] } }, logger: keptLogger(NODES[0], logLines) });
  b = await startTestApp({ zone: w.zone, clock, logger: keptLogger(NODES[1], logLines), overrides: { ...shared, cluster: { nodeName: NODES[1] }, outbound: w.t0.config.outbound } });
  (b as { key: string }).key = w.t0.key;
  hook = await startWebhookReceiver();
  // A superuser session of the server's maintenance database: it ends the nodes' sessions.
  admin = new pg.Client({ connectionString: await pgAdminUrl() });
  await admin.connect();
});
test.after.always(async () => {
  await admin?.end();
  await b?.close();
  await w?.close();
  await hook?.close();
  if (url) await dropTestDatabase(url);
});

const nodes = () => [w.t0, b] as const;
const settle = () => Promise.all([w.settle(), b.app.engine.whenIdle().then(() => b.app.services.events.settled())]);
const dispatchersIdle = () => Promise.all([w.t0.app.webhookDispatcher.whenIdle(), b.app.webhookDispatcher.whenIdle()]);
const emailIdOf = (raw: Buffer) => /^X-Posthorn-Email-ID:\s*(\S+)/im.exec(raw.subarray(0, 16_384).toString('latin1'))?.[1];

test('connections cut at random moments under load, on one node or both: no crash, only 2xx or 500 "not stored", everything accepted delivered once, webhooks exact, the pools recover', async (t) => {
  t.timeout(240_000);
  const seed = seedFor('pg-connection-loss');
  const rnd = prng(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)]!;
  t.log(`seed ${seed} (FUZZ_SEED=${process.env.FUZZ_SEED ?? 'default'}), ${REQUESTS} requests, ${CUTS} cuts`);
  const dbName = new URL(url).pathname.slice(1);
  const started = Date.now();
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

  // ---- The webhook and the campaign's contacts, before the cuts.
  const endpoint = await w.t0.request('POST', '/v1/webhooks', { body: { url: hook.url, eventTypes: [], description: 'conn-loss' } });
  t.is(endpoint.status, 200, JSON.stringify(endpoint.body));
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Conn loss' } })).body.id as string;
  const bulk = await w.t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: Array.from({ length: CONTACTS }, (_, i) => ({ email: `camp${i}@example.org` })) });
  t.is(bulk.status, 200, JSON.stringify(bulk.body));
  const campaign = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'Cut', from: `News <news@${w.domain.name}>`, subject: 'Campaign', contactBookId: book, html: '<p>x {{unsubscribeUrl}}</p>', batchSize: 5, sendNow: true },
  });
  t.is(campaign.status, 200, JSON.stringify(campaign.body));

  // ---- Progress events drive the cutter: API answers, messages at the MX, webhook calls.
  let progress = 0;
  const waiters = new Set<() => void>();
  const tick = () => {
    progress++;
    for (const check of [...waiters]) check();
  };
  const untilProgress = (n: number) =>
    new Promise<void>((resolve) => {
      const target = progress + n;
      const check = () => {
        if (progress >= target || loadDone) {
          waiters.delete(check);
          resolve();
        }
      };
      waiters.add(check);
      check();
    });
  let loadDone = false;
  onSinkMessage = tick;

  // ---- The cutter: after a random number of progress events, end one node's sessions: all
  // of them, those busy in a statement or a transaction, or one picked at random.
  const cutLog: { node: string; mode: string; ended: number; busy: string[] }[] = [];
  const cutter = (async () => {
    for (let c = 0; c < CUTS && !loadDone; c++) {
      await untilProgress(1 + Math.floor(rnd() * 8));
      if (loadDone) break;
      const node = rnd() < 0.7 ? NODES[0] : NODES[1];
      const mode = pick(['all', 'busy', 'busy', 'one'] as const);
      const sessions = (
        await admin.query<{ pid: number; state: string; query: string }>(
          'select pid, state, left(query, 50) as query from pg_stat_activity where datname = $1 and application_name = $2 order by pid',
          [dbName, appName(node)],
        )
      ).rows;
      const chosen = mode === 'all' ? sessions : mode === 'busy' ? sessions.filter((s) => s.state !== 'idle') : sessions.length ? [pick(sessions)] : [];
      for (const s of chosen) await admin.query('select pg_terminate_backend($1)', [s.pid]);
      cutLog.push({ node, mode, ended: chosen.length, busy: chosen.filter((s) => s.state !== 'idle').map((s) => `${s.state}: ${s.query.replace(/\s+/g, ' ')}`) });
    }
  })();

  // ---- The campaign's batches, on both nodes' schedulers, while the cuts run.
  const campaignRuns = (async () => {
    while (!loadDone) {
      await Promise.all(nodes().map((n) => n.app.runCampaigns().catch(() => undefined)));
      await untilProgress(4);
    }
  })();

  // ---- The load: plain sends, keyed sends (retried with their key until stored), scheduled
  // sends an hour ahead; each to a node chosen at random.
  const reqs: Req[] = Array.from({ length: REQUESTS }, (_, i) => {
    const r = rnd();
    const kind: Kind = r < 0.4 ? 'plain' : r < 0.75 ? 'keyed' : 'scheduled';
    const body = sendBody(w, {
      to: `r${i}@example.net`,
      subject: `cl-${i}`,
      ...(kind === 'scheduled' ? { scheduledAt: new Date(clock.nowMs() + 3600_000).toISOString() } : {}),
    });
    return { i, kind, node: rnd() < 0.5 ? 0 : 1, key: kind === 'keyed' || (kind === 'scheduled' && rnd() < 0.5) ? `cl-key-${seed}-${i}` : undefined, body, answers: [] };
  });
  const send = async (r: Req, node: number) => {
    const res = await nodes()[node]!.request('POST', '/v1/emails', { body: r.body, headers: r.key ? { 'Idempotency-Key': r.key } : {} });
    r.answers.push({ status: res.status, body: res.body });
    if (res.status === 200) r.emailId = res.body.emailId;
    tick();
    return res.status;
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: SENDERS }, async () => {
      while (next < reqs.length) {
        const r = reqs[next++]!;
        // A keyed send is retried at once with its key, on either node, a few times.
        for (let tries = 0; tries < 4; tries++) if ((await send(r, tries === 0 ? r.node : (r.node + tries) % 2)) === 200 || !r.key) break;
      }
    }),
  );
  loadDone = true;
  tick();
  await Promise.all([cutter, campaignRuns]);
  const cutsMade = cutLog.length;
  t.log(`load done at ${elapsed()}`);
  t.true(cutsMade >= Math.min(CUTS, 10), `the cuts ran (${cutsMade})`);

  // ---- Every answer was a 2xx or the documented 500.
  const answers = reqs.flatMap((r) => r.answers);
  const odd = answers.filter((a) => !(a.status === 200 || (a.status === 500 && a.body?.error?.code === 'INTERNAL_SERVER_ERROR' && NOT_STORED.test(a.body.error.message))));
  t.deepEqual(odd.slice(0, 5), [], `answers other than 200 and 500 "not stored" (${odd.length})`);

  // ---- The pools recover by themselves: /health, then keyed retries, then fresh sends on both nodes.
  for (const n of nodes()) {
    let h = await n.request('GET', '/health', { key: null });
    // The first request after a cut may meet a dead pooled connection; the next one may not.
    for (let i = 0; i < 3 && h.status !== 200; i++) h = await n.request('GET', '/health', { key: null });
    t.is(h.status, 200, JSON.stringify(h.body));
  }
  const unsettledKeyed = reqs.filter((r) => r.key && r.answers.at(-1)?.status !== 200);
  for (const r of unsettledKeyed) await send(r, r.node);
  t.deepEqual(
    unsettledKeyed.filter((r) => r.answers.at(-1)?.status !== 200).map((r) => ({ i: r.i, last: r.answers.at(-1) })),
    [],
    'a keyed send retried once the cuts stopped is answered 200',
  );
  const fresh: Req[] = Array.from({ length: 10 }, (_, k) => ({ i: REQUESTS + k, kind: 'plain' as const, node: k % 2, body: sendBody(w, { to: `after${k}@example.net`, subject: `cl-${REQUESTS + k}` }), answers: [] }));
  for (const r of fresh) await send(r, r.node);
  t.deepEqual(fresh.map((r) => r.answers[0]!.status), fresh.map(() => 200), 'the pools recovered: new sends go through');
  reqs.push(...fresh);

  // ---- Deliver everything: the scheduled sends come due, the campaign finishes, leases lost
  // with a claim run out, webhook retries come due.
  t.log(`recovered at ${elapsed()}`);
  const campaignState = async () => (await w.t0.request('GET', `/v1/campaigns/${campaign.body.id}`)).body;
  // The clock jumps an hour, then 11 minutes at a time: past every lease (deliveries 10 min,
  // webhook calls 5). So before the next jump nothing may be leased: the leases the cuts left
  // behind with a claim run out at the first jump, and the engines take those deliveries up
  // again in their own time, after a node's settle may have ended; in flight across a jump, a
  // delivery would go to the other node as well, a thing no real clock does.
  const leased = async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query<{ n: number }>('select (select count(*)::int from deliveries where lease_owner is not null) + (select count(*)::int from webhook_calls where lease_owner is not null) as n')).rows[0]!.n;
    } finally {
      await c.end();
    }
  };
  await settle();
  await dispatchersIdle();
  for (let round = 0; round < 8; round++) {
    clock.advance(round === 0 ? 3600_000 + 1000 : 11 * 60_000);
    await Promise.all(nodes().map((n) => n.app.runCampaigns()));
    do {
      await settle();
      await dispatchersIdle();
    } while ((await leased()) > 0);
  }
  t.log(`delivered at ${elapsed()}`);
  // ---- The report.
  const kinds = (k: Kind) => reqs.filter((r) => r.kind === k);
  const count = (list: Req[], p: (r: Req) => boolean) => list.filter(p).length;
  const refused = answers.filter((a) => a.status === 500).length;
  const busy = cutLog.flatMap((c) => c.busy);
  const byStatement = new Map<string, number>();
  for (const s of busy) byStatement.set(s, (byStatement.get(s) ?? 0) + 1);
  const errors = new Map<string, number>();
  for (const l of logLines) errors.set(l.msg, (errors.get(l.msg) ?? 0) + 1);
  t.log(
    `${cutsMade} cuts (${cutLog.reduce((s, c) => s + c.ended, 0)} sessions ended, ${busy.length} busy); ` +
      `${answers.length} answers: ${answers.length - refused} 200, ${refused} 500 "not stored"; ` +
      `plain ${count(kinds('plain'), (r) => !!r.emailId)}/${kinds('plain').length} accepted, keyed ${count(kinds('keyed'), (r) => r.answers.length > 1)} retried, ` +
      `scheduled ${count(kinds('scheduled'), (r) => !!r.emailId)}/${kinds('scheduled').length}; ${w.sink.messages.length} messages at the MX, ${hook.calls.length} webhook calls (${hook.calls.length ? 'receiver' : 'none'})`,
  );
  t.log(`busy statements cut: ${JSON.stringify([...byStatement].sort((x, y) => y[1] - x[1]).slice(0, 12))}`);
  t.log(`warnings and errors logged: ${JSON.stringify([...errors])}`);
  t.is((await campaignState()).status, 'SENT');

  // ---- Exactly once at the MX.
  const copies = new Map<string, number>();
  for (const m of w.sink.messages) {
    const id = emailIdOf(m.raw);
    if (id) copies.set(id, (copies.get(id) ?? 0) + 1);
  }
  const accepted = reqs.filter((r) => r.emailId);
  t.deepEqual(accepted.filter((r) => copies.get(r.emailId!) !== 1).map((r) => ({ i: r.i, kind: r.kind, copies: copies.get(r.emailId!) ?? 0 })), [], 'every send answered 200 reached the MX exactly once');
  const twice = [...copies].filter(([, n]) => n > 1);
  t.deepEqual(twice, [], 'no message went to the MX twice (campaign emails included)');
  const campRcpts = w.sink.messages.flatMap((m) => m.rcptTo).filter((r) => r.startsWith('camp'));
  t.is(new Set(campRcpts).size, CONTACTS, 'every contact got the campaign');
  t.is(campRcpts.length, CONTACTS, 'nobody got it twice');

  // ---- What was answered 500 and never 200 was not stored; a keyed send is one email.
  const q = async <R extends pg.QueryResultRow>(text: string, params: unknown[] = []) => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query<R>(text, params)).rows;
    } finally {
      await c.end();
    }
  };
  const stored = new Map((await q<{ subject: string; n: number }>("select subject, count(*)::int as n from emails where subject like 'cl-%' group by subject")).map((r) => [r.subject, r.n]));
  const refusedUnkeyed = reqs.filter((r) => !r.key && !r.emailId);
  t.deepEqual(refusedUnkeyed.filter((r) => stored.has(`cl-${r.i}`)).map((r) => r.i), [], 'a send answered 500 was not stored');
  t.deepEqual(reqs.filter((r) => r.emailId && stored.get(`cl-${r.i}`) !== 1).map((r) => ({ i: r.i, stored: stored.get(`cl-${r.i}`) })), [], 'each accepted send is one email');

  // ---- Nothing left leased or in flight; every webhook event acknowledged, requests = attempts.
  t.deepEqual(
    await q("select (select count(*)::int from deliveries where state = 'queued') as queued, (select count(*)::int from deliveries where lease_owner is not null) as leased, (select count(*)::int from webhook_calls where state <> 'delivered') as calls_open, (select count(*)::int from idempotency_keys where state = 'in_flight') as keys_in_flight"),
    [{ queued: 0, leased: 0, calls_open: 0, keys_in_flight: 0 }],
  );
  // A POST on a kept-alive connection the receiver closed while it idled (a lull while the
  // store recovers) meets a reset: an attempt on record the receiver may not have seen (docs/
  // api.md, Retries and attempts). Every request received is on record, and every attempt on
  // record was received but such resets.
  const attemptRows = await q<{ event_id: string; n: number; resets: number }>(
    "select event_id, count(*)::int as n, sum(case when response_status is null and error ~ '(ECONNRESET|socket hang up|EPIPE)' then 1 else 0 end)::int as resets from webhook_attempts group by event_id",
  );
  const recorded = new Map(attemptRows.map((r) => [r.event_id, r]));
  const received = new Map<string, number>();
  for (const c of hook.calls) received.set(c.json.id, (received.get(c.json.id) ?? 0) + 1);
  const mismatched = [...new Set([...recorded.keys(), ...received.keys()])].filter((id) => {
    const r = recorded.get(id);
    const got = received.get(id) ?? 0;
    return !r || got > r.n || got < r.n - r.resets;
  });
  t.deepEqual(
    mismatched.slice(0, 5).map((id) => ({ id, recorded: recorded.get(id), received: received.get(id) })),
    [],
    `requests received = attempts recorded, but resets the receiver did not see (${mismatched.length} events differ)`,
  );
  const events = (await q<{ n: number }>('select count(*)::int as n from webhook_events'))[0]!.n;
  t.true(events > REQUESTS, `the events (${events}) were all called`);

});
