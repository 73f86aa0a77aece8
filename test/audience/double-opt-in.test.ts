import test from 'ava';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/lib/clock.js';
import type { BusEvent } from '../../src/core/events.js';
import { signConfirmationToken } from '../../src/core/contacts/confirmation-token.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';

// Double opt-in end to end: the confirmation mail goes through the normal send path to the
// SMTP sink, and the link in it (under POSTHORN_PUBLIC_URL) confirms on POST only.

const clock = new ManualClock(Date.UTC(2026, 10, 22, 10, 0, 0));
let w: MailWorld;
let bookId: string;
const events: BusEvent[] = [];
test.before(async () => {
  w = await startMailWorld({ clock });
  w.t0.app.services.events.on('*', (e) => {
    events.push(e);
  });
  const res = await w.t0.request('POST', '/v1/contactBooks', {
    body: { name: 'Weekly <News>', doubleOptInEnabled: true, doubleOptInFrom: `Weekly News <news@${w.domain.name}>` },
  });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  bookId = res.body.id;
});
test.after.always(async () => {
  await w?.close();
});

const contactsPath = (book: string, rest = '') => `/v1/contactBooks/${book}/contacts${rest}`;
const getContact = async (book: string, id: string) => (await w.t0.request('GET', contactsPath(book, `/${id}`))).body;
const LINK = /http:\/\/posthorn\.test(\/confirm\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)/;

/** Runs `action`, then waits until `count` new messages reached the sink; returns them. */
async function mailAfter<T>(count: number, action: () => Promise<T>): Promise<{ result: T; messages: typeof w.sink.messages }> {
  const before = w.sink.messages.length;
  const result = await action();
  w.t0.app.engine.wake();
  await w.sink.waitForMessages(before + count);
  return { result, messages: w.sink.messages.slice(before) };
}

/** The confirmation path from a raw message's text part (the html carries the same link). */
async function linkIn(raw: Buffer): Promise<{ path: string; parsed: Awaited<ReturnType<typeof simpleParser>> }> {
  const parsed = await simpleParser(raw);
  const m = LINK.exec(parsed.text ?? '');
  if (!m) throw new Error(`no confirmation link in: ${parsed.text}`);
  return { path: m[1]!, parsed };
}

async function page(method: 'GET' | 'POST', path: string) {
  const res = await fetch(w.t0.baseUrl + path, { method });
  return { status: res.status, type: res.headers.get('content-type') ?? '', headers: res.headers, html: await res.text() };
}

test.serial('adding a contact sends the confirmation; GET shows a button and changes nothing; POST confirms', async (t) => {
  const { result, messages } = await mailAfter(1, () => w.t0.request('POST', contactsPath(bookId), { body: { email: 'Reader@Example.net', firstName: 'Rita' } }));
  t.is(result.status, 200, JSON.stringify(result.body));
  const id = result.body.contactId;
  t.like(await getContact(bookId, id), { subscribed: false, unsubscribeReason: null });

  const msg = messages.find((m) => m.rcptTo.includes('reader@example.net'))!;
  t.truthy(msg);
  t.is(await w.dkimStatus(msg.raw), 'pass');
  const { path, parsed } = await linkIn(msg.raw);
  t.is(parsed.subject, 'Please confirm your subscription');
  t.is(parsed.from?.value[0]?.address, `news@${w.domain.name}`);
  t.is(parsed.from?.value[0]?.name, 'Weekly News');
  t.regex(parsed.text ?? '', /Hi Rita,/);
  t.true(String(parsed.html).includes(`href="http://posthorn.test${path}"`), 'the button links to the same URL');
  t.false(String(parsed.html).includes('{{'), 'no placeholder is left');
  // The email is a normal email of the team, linked to the contact.
  const sent = (await w.t0.request('GET', '/v1/emails')).body.data.find((e: any) => e.to === 'reader@example.net');
  t.truthy(sent);

  // GET (what a link scanner does) shows the page and leaves the contact pending.
  const shown = await page('GET', path);
  t.is(shown.status, 200);
  t.regex(shown.type, /^text\/html/);
  t.regex(shown.html, /<form method="post">/);
  t.true(shown.html.includes('Weekly &lt;News&gt;'), 'the book name is escaped');
  t.is(shown.headers.get('referrer-policy'), 'no-referrer');
  t.false((await getContact(bookId, id)).subscribed);

  const before = events.length;
  const confirmed = await page('POST', path);
  t.is(confirmed.status, 200);
  t.regex(confirmed.html, /Subscription confirmed/);
  t.like(await getContact(bookId, id), { subscribed: true, unsubscribeReason: null });
  t.deepEqual(events.slice(before).map((e) => [e.type, e.data.id, e.data.subscribed]), [['contact.updated', id, true]]);
  // Confirming again is harmless; the GET page now says so.
  t.is((await page('POST', path)).status, 200);
  t.regex((await page('GET', path)).html, /already subscribed/);
});

test.serial('forged and malformed links show an error page and change nothing', async (t) => {
  const { result, messages } = await mailAfter(1, () => w.t0.request('POST', contactsPath(bookId), { body: { email: 'forge@example.net' } }));
  const id = result.body.contactId;
  const { path } = await linkIn(messages[0]!.raw);
  const [payload, sig] = path.slice('/confirm/'.length).split('.') as [string, string];
  const flipped = `${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`;
  // Another contact's id with this signature, a wrong signature, a key that is not ours, garbage.
  const otherPayload = Buffer.from(`ct_someoneelse0000000000:${(clock.nowMs() + 1e9).toString(36)}`).toString('base64url');
  const forgedWithOtherSecret = signConfirmationToken('not-the-secret', id, clock.nowMs() + 1e9);
  for (const bad of [`${payload}.${flipped}`, `${otherPayload}.${sig}`, forgedWithOtherSecret, 'garbage', `${payload}`, 'a.b.c', 'x'.repeat(400)]) {
    for (const method of ['GET', 'POST'] as const) {
      const res = await page(method, `/confirm/${bad}`);
      t.is(res.status, 400, `${method} ${bad.slice(0, 40)}`);
      t.regex(res.html, /Invalid link/);
    }
  }
  t.false((await getContact(bookId, id)).subscribed);
});

test.serial('an expired link shows an error page and changes nothing', async (t) => {
  const { result, messages } = await mailAfter(1, () => w.t0.request('POST', contactsPath(bookId), { body: { email: 'late@example.net' } }));
  const { path } = await linkIn(messages[0]!.raw);
  clock.advance(7 * 24 * 3600_000 + 1000);
  try {
    for (const method of ['GET', 'POST'] as const) {
      const res = await page(method, path);
      t.is(res.status, 410);
      t.regex(res.html, /expired/);
    }
    t.false((await getContact(bookId, result.body.contactId)).subscribed);
  } finally {
    clock.advance(-(7 * 24 * 3600_000 + 1000));
  }
});

test.serial('a contact who unsubscribed is never subscribed by the link; a deleted one is gone', async (t) => {
  const { result, messages } = await mailAfter(1, () => w.t0.request('POST', contactsPath(bookId), { body: { email: 'changed-mind@example.net' } }));
  const id = result.body.contactId;
  const { path } = await linkIn(messages[0]!.raw);
  await w.t0.request('PATCH', contactsPath(bookId, `/${id}`), { body: { subscribed: false } });
  const res = await page('POST', path);
  t.is(res.status, 409);
  t.regex(res.html, /unsubscribed/);
  t.like(await getContact(bookId, id), { subscribed: false, unsubscribeReason: 'UNSUBSCRIBED' });
  // Signing up again sends no new link to an address that unsubscribed (only a PATCH subscribes
  // it again), so the page must not send the reader there.
  const before = w.sink.messages.length;
  t.is((await w.t0.request('POST', contactsPath(bookId), { body: { email: 'changed-mind@example.net' } })).status, 200);
  await w.settle();
  t.false(w.sink.messages.slice(before).some((m) => m.rcptTo.includes('changed-mind@example.net')));
  t.notRegex(res.html, /sign up again/i);
  await w.t0.request('DELETE', contactsPath(bookId, `/${id}`));
  t.is((await page('GET', path)).status, 404);
});

test.serial('POST of a pending address re-sends; PUT repeats and subscribed:false send nothing', async (t) => {
  const first = await mailAfter(1, () => w.t0.request('POST', contactsPath(bookId), { body: { email: 'twice@example.net' } }));
  const again = await mailAfter(1, () => w.t0.request('POST', contactsPath(bookId), { body: { email: 'twice@example.net' } }));
  t.is(again.result.body.contactId, first.result.body.contactId);
  t.true(again.messages[0]!.rcptTo.includes('twice@example.net'));

  const before = w.sink.messages.length;
  const put = await mailAfter(1, () => w.t0.request('PUT', contactsPath(bookId, '/ct_new'), { body: { email: 'put@example.net' } }));
  t.true(put.messages[0]!.rcptTo.includes('put@example.net'));
  await w.t0.request('PUT', contactsPath(bookId, `/${put.result.body.contactId}`), { body: { email: 'put@example.net' } });
  const optOut = await w.t0.request('POST', contactsPath(bookId), { body: { email: 'optout@example.net', subscribed: false } });
  t.like(await getContact(bookId, optOut.body.contactId), { subscribed: false, unsubscribeReason: 'UNSUBSCRIBED' });
  await w.settle();
  const after = w.sink.messages.slice(before).flatMap((m) => m.rcptTo);
  t.deepEqual(after, ['put@example.net'], 'exactly one confirmation from the PUTs, none for the opt-out');
});

test.serial('bulk add to a double opt-in book sends one confirmation per new contact', async (t) => {
  const rows = [{ email: 'bulk1@example.net' }, { email: 'bulk2@example.org' }, { email: 'bad' }, { email: 'bulk3@example.net', subscribed: false }];
  const { result, messages } = await mailAfter(2, () => w.t0.request('POST', contactsPath(bookId, '/bulk'), { body: rows }));
  t.is(result.status, 200);
  t.is(result.body.created, 3);
  t.is(result.body.errors.length, 1);
  await w.settle();
  const to = w.sink.messages.slice(w.sink.messages.indexOf(messages[0]!)).flatMap((m) => m.rcptTo).sort();
  t.deepEqual(to, ['bulk1@example.net', 'bulk2@example.org']);
});

test.serial('custom subject and content with variables; content must link to {{confirmUrl}}', async (t) => {
  const content = JSON.stringify({
    type: 'doc',
    content: [
      { type: 'paragraph', content: [{ type: 'text', text: 'Welcome from ' }, { type: 'variable', attrs: { id: 'company', fallback: 'us' } }] },
      { type: 'button', attrs: { text: 'Yes please', url: '{{confirmUrl}}' } },
    ],
  });
  const book = await w.t0.request('POST', '/v1/contactBooks', {
    body: { name: 'Custom', doubleOptInEnabled: true, doubleOptInFrom: `hello@${w.domain.name}`, doubleOptInSubject: 'Confirm, {{firstName,fallback=friend}}', doubleOptInContent: content },
  });
  t.is(book.status, 200, JSON.stringify(book.body));
  const { messages } = await mailAfter(1, () =>
    w.t0.request('POST', contactsPath(book.body.id), { body: { email: 'custom@example.net', firstName: 'Cleo', properties: { company: 'Acme & Co' } } }),
  );
  const parsed = await simpleParser(messages[0]!.raw);
  t.is(parsed.subject, 'Confirm, Cleo');
  t.true(String(parsed.html).includes('Welcome from Acme &amp; Co'));
  t.true(String(parsed.html).includes('Yes please'));
  t.regex(String(parsed.html), /href="http:\/\/posthorn\.test\/confirm\//);
});

test.serial('a confirmation sender name or subject that no header line can hold is 400 when the book is written, not a failure at every confirmation', async (t) => {
  const base = { name: 'Long', doubleOptInEnabled: true, doubleOptInFrom: `hello@${w.domain.name}` };
  for (const extra of [
    { doubleOptInFrom: `${'x'.repeat(950)} <hello@${w.domain.name}>` },
    { doubleOptInFrom: `${'\\'.repeat(600)} <hello@${w.domain.name}>` },
    { doubleOptInSubject: 'z'.repeat(950) },
  ]) {
    const res = await w.t0.request('POST', '/v1/contactBooks', { body: { ...base, ...extra } });
    t.is(res.status, 400, JSON.stringify(res.body).slice(0, 200));
    t.regex(res.body.error.message, /^doubleOptIn(From|Subject): contains a word longer than 900/);
  }
  const ok = await w.t0.request('POST', '/v1/contactBooks', { body: base });
  t.is((await w.t0.request('PATCH', `/v1/contactBooks/${ok.body.id}`, { body: { doubleOptInSubject: 'z'.repeat(950) } })).status, 400);
});

test.serial('contact data with line breaks and header-looking text stays inside the confirmation Subject: no header or recipient added, DKIM passes', async (t) => {
  const book = await w.t0.request('POST', '/v1/contactBooks', {
    body: { name: 'Hostile', doubleOptInEnabled: true, doubleOptInFrom: `hello@${w.domain.name}`, doubleOptInSubject: 'Confirm, {{firstName}}' },
  });
  t.is(book.status, 200, JSON.stringify(book.body));
  const { messages } = await mailAfter(1, () =>
    w.t0.request('POST', contactsPath(book.body.id), { body: { email: 'hostile@example.net', firstName: 'Eve\r\nBcc: smuggled@evil.example\u2028X-Sep: 1' } }),
  );
  const m = messages[0]!;
  t.deepEqual(m.rcptTo, ['hostile@example.net']);
  const raw = m.raw.toString('latin1');
  const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
  for (const line of head.split('\r\n')) t.regex(line, /^([ \t]|[!-9;-~]+:)/);
  t.notRegex(head, /^(Bcc|X-Sep):/im);
  t.true((await simpleParser(m.raw)).subject!.startsWith('Confirm, Eve Bcc: smuggled@evil.example'));
  t.is(await w.dkimStatus(m.raw), 'pass');
});

test.serial('the sender domain must still be verified when the confirmation is sent', async (t) => {
  const second = await addVerifiedDomain(w.t0, 'optin-second.dev');
  const book = await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Fragile', doubleOptInEnabled: true, doubleOptInFrom: `hi@${second.name}` } });
  t.is(book.status, 200);
  // The domain's DKIM record disappears and the re-check takes its verification away.
  w.zone.remove(`posthorn._domainkey.${second.name}`);
  await w.t0.app.services.domains.recheck(true);
  t.not((await w.t0.request('GET', `/v1/domains/${second.id}`)).body.status, 'SUCCESS');
  const res = await w.t0.request('POST', contactsPath(book.body.id), { body: { email: 'nobody@example.net' } });
  t.is(res.status, 400);
  t.regex(res.body.error.message, /^doubleOptInFrom: .*not verified/);
  t.deepEqual((await w.t0.request('GET', contactsPath(book.body.id))).body, [], 'nothing was written');
  const bulk = await w.t0.request('POST', contactsPath(book.body.id, '/bulk'), { body: [{ email: 'nobody@example.net' }] });
  t.is(bulk.status, 400);
  // Contacts that need no confirmation can still be written.
  t.is((await w.t0.request('POST', contactsPath(book.body.id), { body: { email: 'quiet@example.net', subscribed: false } })).status, 200);
});
