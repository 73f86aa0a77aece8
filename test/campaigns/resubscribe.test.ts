import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';

// Someone who unsubscribed by mistake can take it back from the page the link opened: a POST
// from its "Subscribe again" button (never a GET: link scanners fetch links). Only their own
// unsubscribe is undone there, never a bounce or a complaint, and a one-click POST always
// unsubscribes.

const clock = new ManualClock(Date.UTC(2026, 10, 22, 10, 0, 0));
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock });
});
test.after.always(async () => {
  await w?.close();
});

const form = { 'content-type': 'application/x-www-form-urlencoded' };

async function linkFor(address: string): Promise<{ bookId: string; campaignId: string; path: string }> {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: `Book of ${address}` } })).body;
  t_ok(await w.t0.request('POST', `/v1/contactBooks/${book.id}/contacts`, { body: { email: address } }));
  const created = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'News', from: `News <news@${w.domain.name}>`, subject: 'Weekly', contactBookId: book.id, html: '<p>Hi {{unsubscribeUrl}}</p>', sendNow: true },
  });
  t_ok(created);
  await w.t0.app.runCampaigns();
  await w.settle();
  const raw = w.sink.messages.find((m) => m.rcptTo.includes(address))!.raw.toString().replace(/\r\n[ \t]+/g, ' ');
  return { bookId: book.id, campaignId: created.body.id, path: new URL(/List-Unsubscribe: <([^>]+)>/.exec(raw)![1]!).pathname };
}
function t_ok(res: { status: number; body: unknown }): void {
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
}
const contactOf = async (bookId: string) => (await w.t0.request('GET', `/v1/contactBooks/${bookId}/contacts`)).body[0];

test.serial('the page after unsubscribing offers "Subscribe again"; its POST subscribes the contact again, once', async (t) => {
  const { bookId, campaignId, path } = await linkFor('oops@example.net');
  const done = await w.t0.request('POST', path, { key: null, rawBody: 'List-Unsubscribe=One-Click', headers: form });
  t.is(done.status, 200);
  t.like(await contactOf(bookId), { subscribed: false, unsubscribeReason: 'UNSUBSCRIBED' });
  const page = String(done.body);
  t.regex(page, /Subscribe again/);
  // The button posts to the page's own address with the field that says so.
  t.regex(page, /<form method="post"><input type="hidden" name="action" value="resubscribe">/);

  const seen: string[] = [];
  const off = w.t0.app.services.events.on('contact.updated', (e) => void seen.push(String(e.data.id)));
  t.teardown(() => off?.());
  const again = await w.t0.request('POST', path, { key: null, rawBody: 'action=resubscribe', headers: form });
  t.is(again.status, 200);
  t.regex(String(again.body), /subscribed again/i);
  t.like(await contactOf(bookId), { subscribed: true, unsubscribeReason: null });
  t.is(seen.length, 1);
  t.is((await w.t0.request('GET', `/v1/campaigns/${campaignId}`)).body.unsubscribed, 1, 'the unsubscribe stays counted');
  // A second press changes nothing and says the same.
  const twice = await w.t0.request('POST', path, { key: null, rawBody: 'action=resubscribe', headers: form });
  t.regex(String(twice.body), /subscribed again/i);
  t.is(seen.length, 1);
  // The one-click POST (and the page's unsubscribe button) still unsubscribes.
  t.is((await w.t0.request('POST', path, { key: null, rawBody: 'List-Unsubscribe=One-Click', headers: form })).status, 200);
  t.like(await contactOf(bookId), { subscribed: false, unsubscribeReason: 'UNSUBSCRIBED' });
});

test.serial('a bounced or complained address is not subscribed again from the link; a forged link changes nothing', async (t) => {
  const { bookId, path } = await linkFor('gone@example.net');
  const contact = await contactOf(bookId);
  await w.t0.app.services.contacts.unsubscribe(w.t0.teamId, contact.id, 'COMPLAINED');
  const res = await w.t0.request('POST', path, { key: null, rawBody: 'action=resubscribe', headers: form });
  t.is(res.status, 200);
  t.regex(String(res.body), /could not be subscribed again here/);
  t.like(await contactOf(bookId), { subscribed: false, unsubscribeReason: 'COMPLAINED' });

  const forged = await w.t0.request('POST', `${path.slice(0, -4)}AAAA`, { key: null, rawBody: 'action=resubscribe', headers: form });
  t.is(forged.status, 400);
  t.regex(String(forged.body), /not valid/);
  // GET never changes anything, whatever its query.
  t.is((await w.t0.request('GET', `${path}?action=resubscribe`, { key: null })).status, 200);
  t.like(await contactOf(bookId), { subscribed: false, unsubscribeReason: 'COMPLAINED' });
});
