import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';

// A campaign to a book of contacts at an internationalised domain, added in Unicode and in
// A-labels: one contact and one copy per mailbox, a suppressed one skipped, and the unsubscribe
// link of a copy unsubscribes that contact.

const clock = new ManualClock(Date.UTC(2026, 10, 22, 10, 0, 0));
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock });
  w.addRecipientDomain('xn--bcher-kva.example');
});
test.after.always(async () => {
  await w?.close();
});

const doc = JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Body' }] }] });

test.serial('one copy per IDN mailbox however it was added, the suppressed one skipped, its unsubscribe link works', async (t) => {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'IDN' } })).body;
  const bulk = await w.t0.request('POST', `/v1/contactBooks/${book.id}/contacts/bulk`, {
    body: [{ email: 'kunde@bücher.example' }, { email: 'KUNDE@xn--bcher-kva.example' }, { email: 'gesperrt@BÜCHER.example' }, { email: 'frei@xn--bcher-kva.example' }],
  });
  t.is(bulk.status, 200, JSON.stringify(bulk.body));
  const contacts = (await w.t0.request('GET', `/v1/contactBooks/${book.id}/contacts`)).body;
  t.deepEqual(contacts.map((c: any) => c.email).sort(), ['frei@xn--bcher-kva.example', 'gesperrt@xn--bcher-kva.example', 'kunde@xn--bcher-kva.example']);
  t.is((await w.t0.request('POST', '/v1/suppressions', { body: { email: 'Gesperrt@bücher.example' } })).status < 300, true);
  const c = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'IDN', from: `News <news@${w.domain.name}>`, subject: 'Hallo', contactBookId: book.id, content: doc, sendNow: true },
  });
  t.is(c.status, 200, JSON.stringify(c.body));
  await w.t0.app.runCampaigns();
  await w.settle();
  const copies = w.sink.messages.filter((m) => /Subject: Hallo/.test(m.raw.toString()));
  // The sink (smtp-server) reports an A-label RCPT TO in Unicode.
  t.deepEqual(copies.map((m) => m.rcptTo.join()).sort(), ['frei@bücher.example', 'kunde@bücher.example']);
  const link = /List-Unsubscribe: <([^>]+)>/.exec(copies.find((m) => m.rcptTo[0] === 'kunde@bücher.example')!.raw.toString().replace(/\r\n[ \t]+/g, ' '))![1]!;
  t.is((await w.t0.request('POST', new URL(link).pathname, { key: null })).status, 200);
  const after = (await w.t0.request('GET', `/v1/contactBooks/${book.id}/contacts`)).body;
  t.false(after.find((x: any) => x.email === 'kunde@xn--bcher-kva.example').subscribed);
  t.true(after.find((x: any) => x.email === 'frei@xn--bcher-kva.example').subscribed);
});
