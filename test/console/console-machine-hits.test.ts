import { request as httpRequest } from 'node:http';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { campaignFixtures } from '../helpers/campaign-fixtures.js';
import { ConsoleClient, consoleUser } from './helpers/console-client.js';

// The console tells the API's story of machine opens and clicks (docs/api.md, "Machine opens and
// clicks"): a campaign's page shows them beside opened and clicked, an email's timeline marks
// each hit made by a machine with its reason in words. Hits go through the real tracking routes
// on the injected clock.

const clock = new ManualClock(Date.UTC(2026, 11, 2, 9, 0, 0));
let w: MailWorld;
let c: ConsoleClient;

const APPLE_MPP = 'Mozilla/5.0';
const SCANNER = 'Mozilla/5.0 (compatible; Barracuda Sentinel (EE))';
const APPLE_MAIL = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)';

test.before(async () => {
  w = await startMailWorld({ clock });
  const patch = await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { openTracking: true, clickTracking: true } });
  if (patch.status !== 200) throw new Error(JSON.stringify(patch.body));
  await consoleUser(w.t0.app, 'op@machines.dev', w.t0.teamId);
  c = new ConsoleClient(w.t0.baseUrl);
  await c.signIn('op@machines.dev');
});
test.after.always(async () => {
  await w?.close();
});

const { book, campaign, get, run } = campaignFixtures(() => w, () => ({
  name: 'Machines',
  from: `News <news@${w.domain.name}>`,
  subject: 'Hello',
  html: '<p>Hi <a href="https://example.com/offer">Offer</a> {{unsubscribeUrl}}</p>',
  openTracking: true,
  clickTracking: true,
}));

function hit(url: string, userAgent: string | null): Promise<number> {
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

/** The tracked pixel and links of the sink's next message after `before`. */
async function trackedUrls(before: number): Promise<{ px: string; links: string[] }> {
  const [msg] = (await w.sink.waitForMessages(before + 1)).slice(before);
  const html = String((await simpleParser(msg!.raw)).html || '');
  return { px: /<img src="([^"]*\/t\/o\/[^"]*)"/.exec(html)![1]!, links: [...html.matchAll(/<a\b[^>]*\shref="([^"]*\/t\/c\/[^"]*)"/g)].map((m) => m[1]!) };
}

/** Counting follows the status events on the bus: waits until the campaign shows `expected`. */
async function counted(id: string, expected: Record<string, number>): Promise<void> {
  for (;;) {
    const x = await get(id);
    if (Object.entries(expected).every(([k, v]) => x[k] === v)) return;
    await new Promise((r) => setImmediate(r));
  }
}

const counter = (page: string, key: string) => new RegExp(`data-counter="${key}">(\\d+)<`).exec(page)?.[1];

test.serial('campaign page: machine opens and clicks are shown apart, beside the people\'s opened and clicked', async (t) => {
  const before = w.sink.messages.length;
  const bookId = await book('Machines', [{ email: 'reader@example.net' }]);
  const x = await campaign(bookId, { sendNow: true });
  await run();
  const { px, links } = await trackedUrls(before);
  await counted(x.id, { delivered: 1 });

  clock.advance(1000);
  t.is(await hit(px, APPLE_MPP), 200);
  t.is(await hit(links[0]!, SCANNER), 302);
  clock.advance(10 * 60_000);
  t.is(await hit(px, APPLE_MAIL), 200);
  await counted(x.id, { opened: 1, clicked: 0, machineOpened: 1, machineClicked: 1 });

  const page = (await c.get(`/console/campaigns/${x.id}`)).text;
  t.deepEqual(['opened', 'clicked', 'machineOpened', 'machineClicked'].map((k) => counter(page, k)), ['1', '0', '1', '1']);
  t.regex(page, /data-counter="opened">1<\/span> opened \(\+<span data-counter="machineOpened">1<\/span> by machines\)/);
  t.regex(page, /data-counter="clicked">0<\/span> clicked \(\+<span data-counter="machineClicked">1<\/span> by machines\)/);
  t.regex(page, /Opened and clicked count people/);
});

test.serial('email page: each open and click made by a machine is marked, with its reason in words; a person\'s is not', async (t) => {
  const before = w.sink.messages.length;
  const sent = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { subject: 'Tracked', html: '<p><a href="https://example.com/a">A</a> <a href="https://example.com/b">B</a></p>' }) });
  t.is(sent.status, 200);
  const id = sent.body.emailId as string;
  const { px, links } = await trackedUrls(before);
  while (!(await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents.some((e: any) => e.status === 'DELIVERED')) await new Promise((r) => setImmediate(r));

  t.is(await hit(px, APPLE_MAIL), 200); // within seconds of delivery
  clock.advance(60_000);
  t.is(await hit(px, APPLE_MPP), 200);
  t.is(await hit(px, null), 200);
  t.is(await hit(links[0]!, APPLE_MAIL), 302); // a person
  clock.advance(500);
  t.is(await hit(links[1]!, APPLE_MAIL), 302); // another link at once

  const events = (await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents.filter((e: any) => e.status === 'OPENED' || e.status === 'CLICKED');
  t.deepEqual(events.map((e: any) => [e.status, e.data.machineReason]), [
    ['OPENED', 'soon_after_delivery'], ['OPENED', 'scanner_user_agent'], ['OPENED', 'no_user_agent'], ['CLICKED', null], ['CLICKED', 'link_burst'],
  ]);

  const page = (await c.get(`/console/emails/${id}`)).text;
  const timeline = /<ol class="timeline">([\s\S]*?)<\/ol>/.exec(page)![1]!;
  // Newest first, one item per event.
  const items = timeline.split('<li>').slice(1).filter((li) => /badge [a-z]+">(OPENED|CLICKED)</.test(li));
  t.is(items.length, 5);
  const marks = items.map((li) => /by a machine<\/span> ([^<]+)<\/span>/.exec(li)?.[1] ?? (li.includes('by a machine') ? 'unmarked reason' : 'person'));
  t.deepEqual(marks, ['several links at once', 'person', 'no user agent', 'privacy proxy or scanner (user agent)', 'seconds after delivery']);
});
