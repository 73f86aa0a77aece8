import test from 'ava';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { campaignFixtures } from '../helpers/campaign-fixtures.js';

// A campaign run at the edges: book variables named like what every JavaScript object has, and
// a server clock set back while a campaign is between two batches.

const clock = new ManualClock(Date.UTC(2026, 10, 29, 10, 0, 0));
const WINDOW_MS = 60_000;
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock, overrides: { campaigns: { batchWindowSeconds: WINDOW_MS / 1000 } } });
});
test.after.always(async () => {
  await w?.close();
});

const { book, campaign, get, run } = campaignFixtures(() => w, () => ({ name: 'Edge', from: `News <news@${w.domain.name}>`, subject: 'Hello', html: '<p>Hi {{unsubscribeUrl}}</p>' }));
const sentTo = (prefix: string) => w.sink.messages.filter((m) => m.rcptTo.some((r) => r.startsWith(prefix)));

test.serial('book variables named toString or constructor: a contact without them gets the fallback, one with them its value', async (t) => {
  const bookId = await book('Proto', [{ email: 'proto-none@example.net' }, { email: 'proto-set@example.net', properties: { toString: 'Ada', constructor: 'Acme' } }], ['toString', 'constructor']);
  const c = await campaign(bookId, { sendNow: true, subject: 'Hello {{toString,fallback=there}}', html: '<p>Hi {{toString,fallback=friend}} of {{constructor,fallback=us}} {{unsubscribeUrl}}</p>' });
  await run();
  t.is((await get(c.id)).status, 'SENT');
  const none = await simpleParser(sentTo('proto-none@')[0]!.raw);
  const set = await simpleParser(sentTo('proto-set@')[0]!.raw);
  t.is(none.subject, 'Hello there');
  t.regex(String(none.html), /Hi friend of us /);
  t.is(set.subject, 'Hello Ada');
  t.regex(String(set.html), /Hi Ada of Acme /);
});

test.serial('a server clock set back between two batches does not hold the campaign back by the jump: the next batch goes one window later', async (t) => {
  const bookId = await book('Clock back', Array.from({ length: 3 }, (_, i) => ({ email: `back${i}@example.net` })));
  const c = await campaign(bookId, { sendNow: true, batchSize: 1 });
  await run();
  t.is(sentTo('back').length, 1);
  // NTP corrects a clock that ran two hours fast.
  clock.set(clock.nowMs() - 2 * 3600_000);
  await run();
  t.is(sentTo('back').length, 1, 'still within the window as the corrected clock sees it');
  clock.advance(WINDOW_MS);
  await run();
  t.is(sentTo('back').length, 2);
  clock.advance(WINDOW_MS);
  await run();
  t.is(sentTo('back').length, 3);
  t.is((await get(c.id)).sent, 3);
});

test.serial('a campaign paused, then resumed after the server clock was set back before its start time, goes on running (not scheduled again for that time)', async (t) => {
  const bookId = await book('Resume back', Array.from({ length: 3 }, (_, i) => ({ email: `resback${i}@example.net` })));
  const c = await campaign(bookId, { sendNow: true, batchSize: 1 });
  await run();
  t.is(sentTo('resback').length, 1);
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/pause`)).status, 200);
  clock.set(clock.nowMs() - 2 * 3600_000);
  const resumed = await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`);
  t.is(resumed.status, 200);
  t.is(resumed.body.campaign.status, 'RUNNING');
  await run();
  t.is(sentTo('resback').length, 1, 'the window of the last batch, as the corrected clock sees it');
  clock.advance(WINDOW_MS);
  await run();
  t.is(sentTo('resback').length, 2);
  const after = await get(c.id);
  t.is(after.status, 'RUNNING');
  t.is(after.total, 3);
});
