import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';

// Analytics after a known sequence of events over three days: real sends, bounces, opens and
// clicks through the HTTP tracking routes, plus a complaint and a soft bounce emitted on the
// bus as inbound processing would.

const day = (d: number) => Date.UTC(2026, 2, d, 12, 0, 0); // March 2026, noon UTC
const clock = new ManualClock(day(8));
let w: MailWorld;
let second: any;
const sent: Record<string, { id: string; pixel: string; link: string }> = {};

async function send(name: string, body: Record<string, unknown>, status: string) {
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { html: '<p><a href="https://example.com/x">x</a></p>', ...body }) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  const id = res.body.emailId as string;
  for (let i = 0; i < 50; i++) {
    await w.settle();
    if ((await w.t0.request('GET', `/v1/emails/${id}`)).body.latestStatus === status) break;
  }
  const msg = w.sink.messages.find((m) => m.raw.toString().includes(id));
  const raw = msg ? msg.raw.toString().replace(/=\r\n/g, '').replace(/=3D/g, '=') : '';
  sent[name] = { id, pixel: /\/t\/o\/[^"\s]+\.gif/.exec(raw)?.[0] ?? '', link: /\/t\/c\/[^"\s]+/.exec(raw)?.[0] ?? '' };
}

const hit = (path: string) => fetch(w.t0.baseUrl + path, { redirect: 'manual' });

test.before(async () => {
  w = await startMailWorld({ clock });
  await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { openTracking: true, clickTracking: true } });

  // Day 8: two emails, one of them to two recipients at two destinations.
  await send('e1', { to: ['alice@example.net', 'carol@example.org'] }, 'DELIVERED');
  await send('e2', { to: 'bob@example.net' }, 'DELIVERED');

  // Day 9: a hard bounce; opens (e1 twice, e2 once) and clicks (e1 twice); a complaint and a soft bounce.
  clock.set(day(9));
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'ghost@example.net' ? { code: 550, message: '5.1.1 <ghost@example.net>: no such user' } : undefined) });
  await send('e3', { to: 'ghost@example.net' }, 'BOUNCED');
  w.sink.setBehaviour({ onRcpt: () => undefined });
  for (const path of [sent.e1!.pixel, sent.e1!.pixel, sent.e2!.pixel, sent.e1!.link, sent.e1!.link]) {
    const res = await hit(path);
    if (res.status !== 200 && res.status !== 302) throw new Error(`${path}: ${res.status}`);
  }
  const emit = (type: 'email.complained' | 'email.bounced', data: Record<string, unknown>) =>
    w.t0.app.services.events.emit({ type, teamId: w.t0.teamId, domainId: w.domain.id, occurredAt: clock.now().toISOString(), data });
  emit('email.complained', { id: sent.e2!.id, status: 'COMPLAINED' });
  emit('email.bounced', { id: sent.e1!.id, status: 'BOUNCED', bounce: { type: 'Transient', subType: 'MailboxFull', message: 'full' } });

  // Day 10: another domain sends one; e1 is opened again (already counted).
  clock.set(day(10));
  second = await addVerifiedDomain(w.t0, 'second.dev');
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: 'hi@second.dev', to: 'dave@example.net', subject: 's', text: 't' } });
  for (let i = 0; i < 50; i++) {
    await w.settle();
    if ((await w.t0.request('GET', `/v1/emails/${res.body.emailId}`)).body.latestStatus === 'DELIVERED') break;
  }
  await hit(sent.e1!.pixel);
});
test.after.always(async () => {
  await w?.close();
});

const zero = { sent: 0, delivered: 0, opened: 0, clicked: 0, bounced: 0, complained: 0, machineOpened: 0, machineClicked: 0 };

test('the time series counts each day as it happened', async (t) => {
  t.truthy(sent.e1!.pixel && sent.e1!.link, 'tracking was on');
  const res = await w.t0.request('GET', '/v1/analytics/email-time-series?days=7');
  t.is(res.status, 200);
  t.is(res.body.result.length, 7);
  t.deepEqual(
    res.body.result.map((p: any) => p.date),
    ['2026-03-04', '2026-03-05', '2026-03-06', '2026-03-07', '2026-03-08', '2026-03-09', '2026-03-10'],
  );
  t.deepEqual(res.body.result.slice(0, 4), ['04', '05', '06', '07'].map((d) => ({ date: `2026-03-${d}`, ...zero })));
  // sent counts emails; delivered and bounced count recipients; opens and clicks count emails once.
  t.deepEqual(res.body.result[4], { date: '2026-03-08', ...zero, sent: 2, delivered: 3 });
  t.deepEqual(res.body.result[5], { date: '2026-03-09', ...zero, sent: 1, bounced: 2, opened: 2, clicked: 1, complained: 1 });
  t.deepEqual(res.body.result[6], { date: '2026-03-10', ...zero, sent: 1, delivered: 1 });
  t.deepEqual(res.body.totalCounts, { sent: 4, delivered: 4, opened: 2, clicked: 1, bounced: 2, complained: 1, machineOpened: 0, machineClicked: 0 });

  const month = await w.t0.request('GET', '/v1/analytics/email-time-series');
  t.is(month.body.result.length, 30, 'days defaults to 30');
  t.is(month.body.result[0].date, '2026-02-09');
  t.deepEqual(month.body.totalCounts, res.body.totalCounts);

  const one = await w.t0.request('GET', `/v1/analytics/email-time-series?days=7&domainId=${w.domain.id}`);
  t.deepEqual(one.body.totalCounts, { sent: 3, delivered: 3, opened: 2, clicked: 1, bounced: 2, complained: 1, machineOpened: 0, machineClicked: 0 });
  t.deepEqual(one.body.result[6], { date: '2026-03-10', ...zero });
});

test('reputation is all-time, with rates in percent of delivered', async (t) => {
  const all = await w.t0.request('GET', '/v1/analytics/reputation-metrics');
  t.is(all.status, 200);
  t.deepEqual(all.body, { delivered: 4, hardBounced: 1, complained: 1, bounceRate: 25, complaintRate: 25 });
  const one = await w.t0.request('GET', `/v1/analytics/reputation-metrics?domainId=${w.domain.id}`);
  t.deepEqual(one.body, { delivered: 3, hardBounced: 1, complained: 1, bounceRate: 33.33, complaintRate: 33.33 });
  const other = await w.t0.request('GET', `/v1/analytics/reputation-metrics?domainId=${second.id}`);
  t.deepEqual(other.body, { delivered: 1, hardBounced: 0, complained: 0, bounceRate: 0, complaintRate: 0 });
});

test('a key restricted to a domain sees only that domain', async (t) => {
  const bound = (await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 'second only', permission: 'FULL', domainId: second.id })).token;
  const series = await w.t0.request('GET', '/v1/analytics/email-time-series?days=7', { key: bound });
  t.deepEqual(series.body.totalCounts, { ...zero, sent: 1, delivered: 1 });
  const rep = await w.t0.request('GET', '/v1/analytics/reputation-metrics', { key: bound });
  t.is(rep.body.delivered, 1);
  const outside = await w.t0.request('GET', `/v1/analytics/reputation-metrics?domainId=${w.domain.id}`, { key: bound });
  t.is(outside.status, 403);
  t.is(outside.body.error.code, 'FORBIDDEN');
  const sending = (await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 'sender', permission: 'SENDING' })).token;
  t.is((await w.t0.request('GET', '/v1/analytics/email-time-series', { key: sending })).status, 403);
});

test('bad query parameters are 400 naming the parameter; an unknown domain is 404', async (t) => {
  for (const [q, message] of [
    ['days=14', /^days: must be 7 or 30/],
    ['days=7&days=30', /^days: must be given once/],
    ['days=seven', /^days:/],
    ['domainId=abc', /^domainId:/],
    ['domainId=0', /^domainId:/],
    ['domainId=99999999999', /^domainId:/],
  ] as [string, RegExp][]) {
    const res = await w.t0.request('GET', `/v1/analytics/email-time-series?${q}`);
    t.is(res.status, 400, q);
    t.regex(res.body.error.message, message, q);
  }
  const missing = await w.t0.request('GET', '/v1/analytics/reputation-metrics?domainId=4242');
  t.is(missing.status, 404);
  t.regex(missing.body.error.message, /^domainId: domain 4242 not found/);
});
