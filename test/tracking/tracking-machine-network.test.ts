import { request as httpRequest } from 'node:http';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/lib/clock.js';
import { classifyHit } from '../../src/core/tracking/machine-hits.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';

// tracking.machineNetworks: security gateways fetch links from their own ranges posing as a
// browser, long after delivery; a hit from a listed network is a machine's (machineReason
// "network"), judged on the address the tracking route records (X-Forwarded-For's client only
// with http.trustProxy). Real HTTP requests from 127.0.0.1, the list changed between restarts.

const clock = new ManualClock(Date.UTC(2026, 10, 23, 9, 0, 0));
let w: MailWorld;

const BROWSER = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 Safari/537.36';
const HTML = '<html><body><a href="https://example.com/a">A</a></body></html>';

test.before(async () => {
  w = await startMailWorld({ clock, overrides: { tracking: { machineNetworks: ['127.0.0.0/8'] } } });
  const patch = await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { openTracking: true, clickTracking: true } });
  if (patch.status !== 200) throw new Error(JSON.stringify(patch.body));
});
test.after.always(async () => {
  await w?.close();
});

async function emailOf(id: string) {
  return (await w.t0.request('GET', `/v1/emails/${id}`)).body;
}

/** Sends, waits until DELIVERED, then lets the delivery window pass so only the network rule can flag a hit. */
async function deliver(subject: string): Promise<{ id: string; link: string; px: string }> {
  const before = w.sink.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { html: HTML, subject }) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  const [msg] = (await w.sink.waitForMessages(before + 1)).slice(before);
  const html = String((await simpleParser(msg!.raw)).html || '');
  while (!(await emailOf(res.body.emailId)).emailEvents.some((e: any) => e.status === 'DELIVERED')) await new Promise((r) => setImmediate(r));
  clock.advance(10 * 60_000);
  return { id: res.body.emailId, link: /<a\b[^>]*\shref="([^"]*)"/.exec(html)![1]!, px: /<img src="([^"]*\/t\/o\/[^"]*)"/.exec(html)![1]! };
}

function get(url: string, forwardedFor?: string): Promise<number> {
  const u = new URL(url);
  const headers: Record<string, string> = { host: u.host, 'user-agent': BROWSER };
  if (forwardedFor !== undefined) headers['x-forwarded-for'] = forwardedFor;
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
  return { latest: email.latestStatus as string, data: list[list.length - 1]?.data };
}

test('the network rule comes first and stands alone: it flags a browser long after delivery', (t) => {
  const at = { nowMs: 10 * 60_000, deliveredAtMs: 0, windowMs: 3000, userAgent: BROWSER };
  t.deepEqual(classifyHit({ ...at, fromMachineNetwork: true }), { machine: true, machineReason: 'network' });
  t.deepEqual(classifyHit({ ...at, fromMachineNetwork: true, userAgent: null }), { machine: true, machineReason: 'network' });
  t.deepEqual(classifyHit({ ...at, fromMachineNetwork: false }), { machine: false, machineReason: null });
  t.deepEqual(classifyHit(at), { machine: false, machineReason: null });
});

test.serial('with 127.0.0.0/8 listed, a browser\'s open and click from 127.0.0.1 are a machine\'s (a forged X-Forwarded-For changes nothing)', async (t) => {
  const { id, px, link } = await deliver('listed');
  t.is(await get(px), 200);
  let ev = await lastEvent(id, 'OPENED');
  t.like(ev.data, { userAgent: BROWSER, ip: '127.0.0.1', machine: true, machineReason: 'network' });
  t.is(ev.latest, 'DELIVERED', 'a machine open leaves latestStatus alone');

  // Without http.trustProxy the header is the client's own writing: the connection counts.
  t.is(await get(px, '203.0.113.9'), 200);
  t.like((await lastEvent(id, 'OPENED')).data, { ip: '127.0.0.1', machine: true, machineReason: 'network' });

  t.is(await get(link), 302);
  ev = await lastEvent(id, 'CLICKED');
  t.like(ev.data, { url: 'https://example.com/a', ip: '127.0.0.1', machine: true, machineReason: 'network' });
  t.is(ev.latest, 'DELIVERED');
});

test.serial('behind a trusted proxy the listed network is matched against X-Forwarded-For\'s client', async (t) => {
  await w.restart({ http: { trustProxy: true }, tracking: { machineNetworks: ['192.0.2.0/24'] } });
  const { id, px, link } = await deliver('proxied');
  t.is(await get(px, '192.0.2.7'), 200);
  t.like((await lastEvent(id, 'OPENED')).data, { ip: '192.0.2.7', machine: true, machineReason: 'network' });
  t.is(await get(link, '192.0.2.8'), 302);
  t.like((await lastEvent(id, 'CLICKED')).data, { ip: '192.0.2.8', machine: true, machineReason: 'network' });
  // A reader elsewhere, and the proxy's own connection address (127.0.0.1, not listed now), are people.
  t.is(await get(px, '203.0.113.9'), 200);
  t.like((await lastEvent(id, 'OPENED')).data, { ip: '203.0.113.9', machine: false, machineReason: null });
  t.is(await get(link), 302);
  const ev = await lastEvent(id, 'CLICKED');
  t.like(ev.data, { ip: '127.0.0.1', machine: false, machineReason: null });
  t.is(ev.latest, 'CLICKED');
});

test.serial('with no network listed (the default), the same browser hits from 127.0.0.1 are a person\'s', async (t) => {
  await w.restart({ tracking: { machineNetworks: [] } });
  t.deepEqual(w.t0.config.tracking.machineNetworks, []);
  const { id, px, link } = await deliver('unlisted');
  t.is(await get(px), 200);
  let ev = await lastEvent(id, 'OPENED');
  t.like(ev.data, { ip: '127.0.0.1', machine: false, machineReason: null });
  t.is(ev.latest, 'OPENED');
  t.is(await get(link), 302);
  ev = await lastEvent(id, 'CLICKED');
  t.like(ev.data, { ip: '127.0.0.1', machine: false, machineReason: null });
  t.is(ev.latest, 'CLICKED');
});
