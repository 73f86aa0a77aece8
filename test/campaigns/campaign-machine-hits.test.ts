import { request as httpRequest } from 'node:http';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { campaignFixtures } from '../helpers/campaign-fixtures.js';

// A campaign's opened and clicked count people, as email analytics do: an open or click made by
// a machine (core/tracking/machine-hits.ts) counts in machineOpened / machineClicked instead,
// live and in the recount after a restart (docs/api.md, Campaigns).

const clock = new ManualClock(Date.UTC(2026, 10, 30, 9, 0, 0));
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock });
});
test.after.always(async () => {
  await w?.close();
});

const APPLE_MPP = 'Mozilla/5.0';
const SCANNER = 'Mozilla/5.0 (compatible; Barracuda Sentinel (EE))';
const APPLE_MAIL = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)';

const { book, campaign, get, run } = campaignFixtures(() => w, () => ({
  name: 'Machines',
  from: `News <news@${w.domain.name}>`,
  subject: 'Hello',
  html: '<p>Hi <a href="https://example.com/offer">Offer</a> {{unsubscribeUrl}}</p>',
  openTracking: true,
  clickTracking: true,
}));

function hit(url: string, userAgent: string): Promise<number> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: w.t0.app.listeners.http!.port, path: u.pathname, method: 'GET', headers: { host: u.host, 'user-agent': userAgent } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Counting follows the status events on the bus: waits until the campaign shows `expected`. */
async function counted(id: string, expected: Record<string, number>): Promise<Record<string, unknown>> {
  for (;;) {
    const c = await get(id);
    if (Object.entries(expected).every(([k, v]) => c[k] === v)) return c;
    await new Promise((r) => setImmediate(r));
  }
}

test.serial('an Apple-MPP fetch and a scanner click right after delivery leave opened and clicked alone; a person\'s open and click count; the recount agrees', async (t) => {
  const before = w.sink.messages.length;
  const bookId = await book('Machines', [{ email: 'reader@example.net' }]);
  const c = await campaign(bookId, { sendNow: true });
  await run();
  const [msg] = (await w.sink.waitForMessages(before + 1)).slice(before);
  const html = String((await simpleParser(msg!.raw)).html || '');
  const px = /<img src="([^"]*\/t\/o\/[^"]*)"/.exec(html)![1]!;
  const link = /<a\b[^>]*\shref="([^"]*\/t\/c\/[^"]*)"/.exec(html)![1]!;
  await counted(c.id, { delivered: 1 });

  clock.advance(1000);
  t.is(await hit(px, APPLE_MPP), 200);
  t.is(await hit(link, SCANNER), 302);
  let got = await counted(c.id, { machineOpened: 1, machineClicked: 1 });
  t.is(got.opened, 0, 'a privacy proxy is not a reader');
  t.is(got.clicked, 0, 'a link scanner is not a reader');

  clock.advance(10 * 60_000);
  t.is(await hit(px, APPLE_MAIL), 200);
  t.is(await hit(link, APPLE_MAIL), 302);
  t.is(await hit(px, APPLE_MPP), 200, 'another machine hit counts nothing more');
  got = await counted(c.id, { opened: 1, clicked: 1 });
  t.like(got, { delivered: 1, opened: 1, clicked: 1, machineOpened: 1, machineClicked: 1 });

  // Killed before any of it was counted: the recount reads the same from the stored events.
  const db = w.t0.app.store.db;
  await db.updateTable('campaign_recipients').set({ counted: 'sent,delivered' }).where('campaign_id', '=', c.id).execute();
  await db.updateTable('campaigns').set({ opened: 0, clicked: 0, machine_opened: 0, machine_clicked: 0 }).where('id', '=', c.id).execute();
  t.is(await w.t0.app.services.campaigns.recoverCounts(), 4);
  t.like(await get(c.id), { delivered: 1, opened: 1, clicked: 1, machineOpened: 1, machineClicked: 1 });
  t.is(await w.t0.app.services.campaigns.recoverCounts(), 0, 'once each');
});

test.serial('an email only a machine opened is not counted as opened by the recount either', async (t) => {
  const before = w.sink.messages.length;
  const bookId = await book('Machines only', [{ email: 'proxy@example.net' }]);
  const c = await campaign(bookId, { sendNow: true });
  await run();
  const [msg] = (await w.sink.waitForMessages(before + 1)).slice(before);
  const px = /<img src="([^"]*\/t\/o\/[^"]*)"/.exec(String((await simpleParser(msg!.raw)).html || ''))![1]!;
  await counted(c.id, { delivered: 1 });
  clock.advance(1000);
  t.is(await hit(px, APPLE_MPP), 200);
  await counted(c.id, { machineOpened: 1 });

  const db = w.t0.app.store.db;
  await db.updateTable('campaign_recipients').set({ counted: '' }).where('campaign_id', '=', c.id).execute();
  await db.updateTable('campaigns').set({ sent: 0, delivered: 0, machine_opened: 0 }).where('id', '=', c.id).execute();
  await w.t0.app.services.campaigns.recoverCounts();
  t.like(await get(c.id), { sent: 1, delivered: 1, opened: 0, clicked: 0, machineOpened: 1, machineClicked: 0 });
});
