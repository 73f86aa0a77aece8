import { request as httpRequest } from 'node:http';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/lib/clock.js';
import { classifyHit } from '../../src/core/tracking/machine-hits.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';

// Opens and clicks made by machines (privacy proxies, link scanners) over real HTTP, on the
// injected clock: still recorded and sent to webhooks, flagged `machine` with a reason, leaving
// latestStatus alone and counted apart in analytics (docs/api.md, Tracking and Analytics).

const clock = new ManualClock(Date.UTC(2026, 10, 23, 9, 0, 0));
let w: MailWorld;
let receiver: WebhookReceiver;

const APPLE_MPP = 'Mozilla/5.0';
const APPLE_MAIL = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)';
const GMAIL_PROXY = 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)';
const BROWSER = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 Safari/537.36';
const SCANNER = 'Mozilla/5.0 (compatible; Barracuda Sentinel (EE))';

test.before(async () => {
  w = await startMailWorld({ clock, overrides: { webhooks: { allowPrivate: true } } });
  receiver = await startWebhookReceiver();
  await w.t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['email.opened', 'email.clicked'] } });
  const patch = await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { openTracking: true, clickTracking: true } });
  if (patch.status !== 200) throw new Error(JSON.stringify(patch.body));
});
test.after.always(async () => {
  await w?.close();
  await receiver?.close();
});

const HTML = '<html><body><a href="https://example.com/a">A</a> <a href="https://example.com/b">B</a> <a href="https://example.com/c">C</a></body></html>';
const hrefs = (html: string) => [...html.matchAll(/<a\b[^>]*\shref="([^"]*)"/g)].map((m) => m[1]!);
const pixel = (html: string) => /<img src="([^"]*\/t\/o\/[^"]*)"/.exec(html)![1]!;

async function emailOf(id: string) {
  return (await w.t0.request('GET', `/v1/emails/${id}`)).body;
}

/** Sends, and returns once the email is DELIVERED (its time is the clock's now). */
async function deliver(subject: string): Promise<{ id: string; links: string[]; px: string }> {
  const before = w.sink.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { html: HTML, subject }) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  const [msg] = (await w.sink.waitForMessages(before + 1)).slice(before);
  const html = String((await simpleParser(msg!.raw)).html || '');
  while (!(await emailOf(res.body.emailId)).emailEvents.some((e: any) => e.status === 'DELIVERED')) await new Promise((r) => setImmediate(r));
  return { id: res.body.emailId, links: hrefs(html), px: pixel(html) };
}

function get(url: string, userAgent: string | null): Promise<number> {
  const u = new URL(url);
  const headers: Record<string, string> = { host: u.host };
  if (userAgent !== null) headers['user-agent'] = userAgent;
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: w.t0.app.listeners.http!.port, path: u.pathname, method: 'GET', headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });
}

async function lastEvent(id: string, status: 'OPENED' | 'CLICKED') {
  const email = await emailOf(id);
  const list = email.emailEvents.filter((e: any) => e.status === status);
  return { latest: email.latestStatus as string, count: list.length as number, data: list[list.length - 1]?.data };
}

test('the rules: scanner user agents, no user agent, soon after delivery, a burst of links; Gmail\'s proxy is a person', (t) => {
  const at = { nowMs: 100_000, deliveredAtMs: 0, windowMs: 3000 };
  t.deepEqual(classifyHit({ ...at, userAgent: APPLE_MPP }), { machine: true, machineReason: 'scanner_user_agent' });
  t.deepEqual(classifyHit({ ...at, userAgent: 'x MIMECAST y' }), { machine: true, machineReason: 'scanner_user_agent' });
  t.deepEqual(classifyHit({ ...at, userAgent: null }), { machine: true, machineReason: 'no_user_agent' });
  t.deepEqual(classifyHit({ ...at, userAgent: ' ' }), { machine: true, machineReason: 'no_user_agent' });
  t.deepEqual(classifyHit({ ...at, userAgent: GMAIL_PROXY }), { machine: false, machineReason: null });
  t.deepEqual(classifyHit({ ...at, userAgent: APPLE_MAIL, deliveredAtMs: 97_000 }), { machine: true, machineReason: 'soon_after_delivery' });
  t.deepEqual(classifyHit({ ...at, userAgent: APPLE_MAIL, deliveredAtMs: 96_999 }), { machine: false, machineReason: null });
  t.deepEqual(classifyHit({ ...at, userAgent: APPLE_MAIL, deliveredAtMs: 99_000, windowMs: 0 }), { machine: false, machineReason: null }, '0 turns the window off');
  t.deepEqual(classifyHit({ ...at, userAgent: BROWSER, deliveredAtMs: null, otherLinkJustClicked: true }), { machine: true, machineReason: 'link_burst' });
});

test.serial('an Apple-MPP-like fetch right after delivery is a machine\'s; the mail client\'s later open is a person\'s', async (t) => {
  const { id, px } = await deliver('mpp');
  clock.advance(1000);
  t.is(await get(px, APPLE_MPP), 200);
  let ev = await lastEvent(id, 'OPENED');
  t.like(ev.data, { userAgent: APPLE_MPP, machine: true, machineReason: 'scanner_user_agent' });
  t.is(ev.latest, 'DELIVERED', 'a machine open leaves latestStatus alone');

  // A browser-like agent within the window is a prefetch too.
  t.is(await get(px, APPLE_MAIL), 200);
  ev = await lastEvent(id, 'OPENED');
  t.like(ev.data, { machine: true, machineReason: 'soon_after_delivery' });
  t.is(ev.latest, 'DELIVERED');

  clock.advance(10 * 60_000);
  t.is(await get(px, APPLE_MAIL), 200);
  ev = await lastEvent(id, 'OPENED');
  t.is(ev.count, 3, 'every hit is recorded');
  t.like(ev.data, { userAgent: APPLE_MAIL, machine: false, machineReason: null });
  t.is(ev.latest, 'OPENED');

  // Webhooks carry the flag, in order.
  const calls = (await receiver.waitFor(3)).map((c) => c.json).filter((j: any) => j.data.id === id);
  t.deepEqual(
    calls.map((j: any) => [j.type, j.data.open.machine, j.data.open.machineReason]),
    [
      ['email.opened', true, 'scanner_user_agent'],
      ['email.opened', true, 'soon_after_delivery'],
      ['email.opened', false, null],
    ],
  );
});

test.serial('a scanner\'s click, a click without a user agent and a burst over several links are machines\'; a person\'s click moves latestStatus', async (t) => {
  const { id, links } = await deliver('scanner');
  clock.advance(60_000);
  t.is(await get(links[0]!, SCANNER), 302);
  let ev = await lastEvent(id, 'CLICKED');
  t.like(ev.data, { url: 'https://example.com/a', userAgent: SCANNER, machine: true, machineReason: 'scanner_user_agent' });
  t.is(ev.latest, 'DELIVERED');

  t.is(await get(links[0]!, null), 302);
  t.like((await lastEvent(id, 'CLICKED')).data, { machine: true, machineReason: 'no_user_agent' });

  // Later a person clicks B (two scanner clicks on A a minute ago do not make it a burst)...
  clock.advance(60_000);
  t.is(await get(links[1]!, BROWSER), 302);
  ev = await lastEvent(id, 'CLICKED');
  t.like(ev.data, { url: 'https://example.com/b', machine: false, machineReason: null });
  t.is(ev.latest, 'CLICKED');
  // ...and the same link again at once is a double click, still a person.
  t.is(await get(links[1]!, BROWSER), 302);
  t.like((await lastEvent(id, 'CLICKED')).data, { machine: false });
  // A different link within the burst window is not.
  clock.advance(500);
  t.is(await get(links[2]!, BROWSER), 302);
  t.like((await lastEvent(id, 'CLICKED')).data, { url: 'https://example.com/c', machine: true, machineReason: 'link_burst' });

  const clicks = (await receiver.waitFor(3 + 5)).map((c) => c.json).filter((j: any) => j.data.id === id && j.type === 'email.clicked');
  t.deepEqual(clicks.map((j: any) => j.data.click.machine), [true, true, false, false, true]);
});

test.serial('analytics count people\'s opens and clicks, each email once, and machines\' apart', async (t) => {
  const { id, px, links } = await deliver('analytics');
  clock.advance(1000);
  await get(px, APPLE_MPP); // machine only: counts in machineOpened, not opened
  await get(links[0]!, SCANNER);
  await get(links[1]!, SCANNER);
  t.is((await emailOf(id)).latestStatus, 'DELIVERED');
  const series = await w.t0.request('GET', '/v1/analytics/email-time-series?days=7');
  t.is(series.status, 200);
  // The earlier tests: 'mpp' opened by a machine and a person; 'scanner' clicked by machines and a person.
  t.like(series.body.totalCounts, { delivered: 3, opened: 1, machineOpened: 2, clicked: 1, machineClicked: 2 });
  const today = series.body.result[series.body.result.length - 1];
  t.like(today, { opened: 1, machineOpened: 2, clicked: 1, machineClicked: 2 });
});
