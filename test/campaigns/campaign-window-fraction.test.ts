import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';

// campaigns.batchWindowSeconds takes fractions, finer than a millisecond too, and the store
// keeps due times in whole milliseconds (PostgreSQL refuses anything else for a bigint). The
// window is whole milliseconds before it reaches a row, on every store.

const clock = new ManualClock(Date.UTC(2026, 10, 29, 10, 0, 0));
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock, overrides: { campaigns: { batchWindowSeconds: 1.0004 } } });
});
test.after.always(async () => {
  await w?.close();
});

test('a window of 1.0004 seconds (1000.4 ms, so 1000) paces a campaign batch by batch', async (t) => {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Fraction' } })).body;
  const contacts = Array.from({ length: 4 }, (_, i) => ({ email: `frac${i}@example.net` }));
  t.is((await w.t0.request('POST', `/v1/contactBooks/${book.id}/contacts/bulk`, { body: contacts })).status, 200);
  const res = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'Fraction', from: `News <news@${w.domain.name}>`, subject: 'Hello', contactBookId: book.id, html: '<p>Hi {{unsubscribeUrl}}</p>', sendNow: true, batchSize: 2 },
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  const sent = () => w.sink.messages.flatMap((m) => m.rcptTo).filter((r) => r.startsWith('frac')).length;
  await w.t0.app.runCampaigns();
  await w.settle();
  t.is(sent(), 2);
  const row = await w.t0.app.store.db.selectFrom('campaigns').select('next_batch_at').where('id', '=', res.body.id).executeTakeFirstOrThrow();
  t.is(row.next_batch_at, clock.nowMs() + 1000);
  clock.advance(1000);
  await w.t0.app.runCampaigns();
  await w.settle();
  t.is(sent(), 4);
});
