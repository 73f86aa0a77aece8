import test from 'ava';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { campaignFixtures } from '../helpers/campaign-fixtures.js';
import { createCampaignService } from '../../src/core/campaigns/campaign-service.js';
import { createCampaignsRepository } from '../../src/store/repositories/campaigns-repository.js';
import { createContactBooksRepository } from '../../src/store/repositories/contact-books-repository.js';
import { createSegmentsRepository } from '../../src/store/repositories/segments-repository.js';

const clock = new ManualClock(Date.UTC(2026, 10, 22, 10, 0, 0));
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock, overrides: { campaigns: { batchWindowSeconds: 60 } } });
});
test.after.always(async () => {
  await w?.close();
});

const doc = (...content: unknown[]) => JSON.stringify({ type: 'doc', content });
const para = (...content: unknown[]) => ({ type: 'paragraph', content });
const text = (t: string) => ({ type: 'text', text: t });

const { book, campaign, get, run } = campaignFixtures(() => w, () => ({ name: 'Launch', from: `News <news@${w.domain.name}>`, subject: 'Hello {{firstName,fallback=friend}}', content: doc(para(text('Body'))) }));
const sentTo = (prefix: string) => w.sink.messages.filter((m) => m.rcptTo.some((r) => r.startsWith(prefix)));

test.serial('state machine: draft -> scheduled -> running -> sent; wrong-state operations are 400', async (t) => {
  const bookId = await book('States', [{ email: 'st1@example.net' }, { email: 'st2@example.net' }]);
  const c = await campaign(bookId);
  t.is(c.status, 'DRAFT');
  t.regex(c.id, /^cp_/);
  for (const k of ['total', 'sent', 'delivered', 'opened', 'clicked', 'bounced', 'hardBounced', 'complained', 'unsubscribed']) t.is(c[k], 0, k);
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/pause`)).status, 400);
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`)).status, 400);
  const patched = await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { name: 'Launch 2', batchSize: 10 } });
  t.is(patched.body.name, 'Launch 2');
  const sched = await w.t0.request('POST', `/v1/campaigns/${c.id}/schedule`, { body: { scheduledAt: 'in 1 hour' } });
  t.true(sched.body.success);
  t.is((await get(c.id)).status, 'SCHEDULED');
  const notDraft = await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { name: 'x' } });
  t.is(notDraft.status, 400);
  t.regex(notDraft.body.error.message, /draft/);
  await run();
  t.is((await get(c.id)).status, 'SCHEDULED', 'not before its time');
  clock.advance(3600_000);
  await run();
  const after = await get(c.id);
  t.true(after.status === 'RUNNING' || after.status === 'SENT');
  t.is(after.total, 2);
  await run();
  t.is((await get(c.id)).status, 'SENT');
  t.is(sentTo('st').length, 2);
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/schedule`, {})).status, 400);
  const list = await w.t0.request('GET', '/v1/campaigns?status=SENT&search=launch 2');
  t.true(list.body.campaigns.some((x: any) => x.id === c.id));
  t.is((await w.t0.request('GET', '/v1/campaigns?status=NOPE')).status, 400);
  const del = await w.t0.request('DELETE', `/v1/campaigns/${c.id}`);
  t.is(del.body.id, c.id);
  t.is((await w.t0.request('DELETE', `/v1/campaigns/${c.id}`)).status, 404);
});

test.serial('pacing: batchSize messages per batch window', async (t) => {
  const contacts = Array.from({ length: 7 }, (_, i) => ({ email: `pace${i}@example.net` }));
  const bookId = await book('Pacing', contacts);
  const c = await campaign(bookId, { sendNow: true, batchSize: 3 });
  await run();
  t.is(sentTo('pace').length, 3);
  await run();
  t.is(sentTo('pace').length, 3, 'the next batch waits for the window');
  clock.advance(60_000);
  await run();
  t.is(sentTo('pace').length, 6);
  clock.advance(60_000);
  await run();
  t.is(sentTo('pace').length, 7);
  clock.advance(60_000);
  await run();
  const done = await get(c.id);
  t.is(done.status, 'SENT');
  t.is(done.total, 7);
  t.is(done.sent, 7);
  t.is(done.delivered, 7);
});

test.serial('the audience is the book as of the start: contacts added while it runs are not mailed, and sent never passes total', async (t) => {
  const bookId = await book('Snapshot', Array.from({ length: 6 }, (_, i) => ({ email: `snap${i}@example.net` })));
  const c = await campaign(bookId, { sendNow: true, batchSize: 2 });
  await run();
  t.is(sentTo('snap').length, 2);
  // Contact ids are random: without the start as a bound, some of these would sort after the cursor and be mailed.
  clock.advance(1000);
  const late = Array.from({ length: 20 }, (_, i) => ({ email: `snaplate${i}@example.net` }));
  t.is((await w.t0.request('POST', `/v1/contactBooks/${bookId}/contacts/bulk`, { body: late })).status, 200);
  for (let i = 0; i < 4; i++) {
    clock.advance(60_000);
    await run();
  }
  t.is(sentTo('snaplate').length, 0);
  t.is(sentTo('snap').length, 6);
  const done = await get(c.id);
  t.is(done.status, 'SENT');
  t.is(done.total, 6);
  t.is(done.sent, 6);
  // A later campaign to the same book has them all.
  await campaign(bookId, { sendNow: true, batchSize: 100 });
  await run();
  t.is(sentTo('snaplate').length, 20);
});

test.serial('personalised, with per-contact unsubscribe links and RFC 8058 headers; footer added when missing', async (t) => {
  const bookId = await book('Personal', [{ email: 'ann@example.net', firstName: 'Ann', properties: { company: 'Acme & Co' } }, { email: 'bob@example.net' }], ['company']);
  await campaign(bookId, { sendNow: true, subject: 'Hi {{firstName,fallback=friend}}', content: doc(para(text('Welcome {{email}} from {{company,fallback=nowhere}}'))) });
  await run();
  const ann = await simpleParser(sentTo('ann@')[0]!.raw);
  const bob = await simpleParser(sentTo('bob@')[0]!.raw);
  t.is(ann.subject, 'Hi Ann');
  t.is(bob.subject, 'Hi friend');
  t.regex(String(ann.html), /Welcome ann@example\.net from Acme &amp; Co/);
  t.regex(String(bob.html), /from nowhere/);
  const header = String(ann.headers.get('list-unsubscribe') ?? (ann.headers.get('list') as any)?.unsubscribe?.url ?? '');
  const raw = sentTo('ann@')[0]!.raw.toString().replace(/\r\n[ \t]+/g, ' '); // unfold headers (RFC 5322 2.2.3)
  t.regex(raw, /List-Unsubscribe: <http:\/\/posthorn\.test\/unsubscribe\/[^>]+>, <mailto:unsubscribe\+[^@]+@mx\.posthorn\.test>/);
  t.regex(raw, /List-Unsubscribe-Post: List-Unsubscribe=One-Click/);
  t.is(await w.dkimStatus(sentTo('ann@')[0]!.raw), 'pass');
  t.truthy(header !== undefined);
  // The footer carries the same per-contact link.
  const link = /http:\/\/posthorn\.test\/unsubscribe\/[A-Za-z0-9_.-]+/.exec(String(ann.html))![0];
  t.true(raw.includes(link.split('/unsubscribe/')[1]!.slice(0, 20)));
});

test.serial('contact data with line breaks, header-looking text and line separators stays inside the Subject: one field, no header or recipient added, DKIM passes', async (t) => {
  const evil = 'Eve\r\nBcc: smuggled@evil.example\r\nX-Injected: 1\u2028X-Sep: 2\u0085X-Nel: 3';
  const bookId = await book('Hostile', [{ email: 'eve@example.net', firstName: evil, properties: { company: 'A\r\n\r\n<b>body</b>' } }], ['company']);
  await campaign(bookId, { sendNow: true, subject: 'Hi {{firstName}} of {{company}}', content: doc(para(text('Dear {{firstName}}'))) });
  await run();
  const msgs = sentTo('eve@');
  t.is(msgs.length, 1);
  const m = msgs[0]!;
  t.deepEqual(m.rcptTo, ['eve@example.net']);
  const raw = m.raw.toString('latin1');
  const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
  // Every header line is a field or a fold, none over 998 octets; no field the data named.
  for (const line of head.split('\r\n')) {
    t.regex(line, /^([ \t]|[!-9;-~]+:)/);
    t.true(Buffer.byteLength(line) <= 998);
  }
  t.notRegex(head, /^(Bcc|X-Injected|X-Sep|X-Nel):/im);
  t.is(head.match(/^Subject:/gim)?.length, 1);
  const parsed = await simpleParser(m.raw);
  t.true(parsed.subject!.startsWith('Hi Eve Bcc: smuggled@evil.example X-Injected: 1'), parsed.subject);
  t.is(parsed.bcc, undefined);
  t.is(await w.dkimStatus(m.raw), 'pass');
});

test.serial('unsubscribe: GET shows a page and changes nothing; POST unsubscribes; one-click POST works', async (t) => {
  const bookId = await book('Unsub', [{ email: 'u1@example.net' }, { email: 'u2@example.net' }]);
  const c = await campaign(bookId, { sendNow: true });
  await run();
  const link = (prefix: string) => /List-Unsubscribe: <([^>]+)>/.exec(sentTo(prefix)[0]!.raw.toString().replace(/\r\n[ \t]+/g, ' '))![1]!;
  const path1 = new URL(link('u1@')).pathname;
  const page = await w.t0.request('GET', path1, { key: null });
  t.is(page.status, 200);
  t.regex(String(page.body), /<form method="post"/);
  let contacts = (await w.t0.request('GET', `/v1/contactBooks/${bookId}/contacts`)).body;
  t.true(contacts.find((x: any) => x.email === 'u1@example.net').subscribed, 'GET changed nothing');
  const posted = await w.t0.request('POST', path1, { key: null });
  t.is(posted.status, 200);
  const oneClick = await fetch(`${w.t0.baseUrl}${new URL(link('u2@')).pathname}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'List-Unsubscribe=One-Click',
  });
  t.is(oneClick.status, 200);
  contacts = (await w.t0.request('GET', `/v1/contactBooks/${bookId}/contacts`)).body;
  t.false(contacts.find((x: any) => x.email === 'u1@example.net').subscribed);
  t.false(contacts.find((x: any) => x.email === 'u2@example.net').subscribed);
  t.is((await get(c.id)).unsubscribed, 2);
  await w.t0.request('POST', path1, { key: null });
  t.is((await get(c.id)).unsubscribed, 2, 'counted once per contact');
  const forged = await w.t0.request('POST', `${path1.slice(0, -3)}AAA`, { key: null });
  t.is(forged.status, 400);
  t.is((await w.t0.request('GET', '/unsubscribe/nonsense', { key: null })).status, 400);
});

test.serial('suppressed and unsubscribed contacts are skipped', async (t) => {
  const bookId = await book('Skips', [{ email: 'keep@example.org' }, { email: 'supp@example.org' }, { email: 'gone@example.org', subscribed: false }]);
  await w.t0.request('POST', '/v1/suppressions', { body: { email: 'supp@example.org', reason: 'MANUAL' } });
  const c = await campaign(bookId, { sendNow: true });
  await run();
  await run();
  t.is(sentTo('keep@').length, 1);
  t.is(sentTo('supp@').length, 0);
  t.is(sentTo('gone@').length, 0);
  t.is((await get(c.id)).total, 1);
});

test.serial('pause and resume; a restart continues where it stopped and nobody gets the campaign twice', async (t) => {
  const contacts = Array.from({ length: 10 }, (_, i) => ({ email: `resume${i}@example.org` }));
  const bookId = await book('Resume', contacts);
  const c = await campaign(bookId, { sendNow: true, batchSize: 4 });
  await run();
  t.is(sentTo('resume').length, 4);
  t.deepEqual((await w.t0.request('POST', `/v1/campaigns/${c.id}/pause`)).body.success, true);
  clock.advance(60_000);
  await run();
  t.is(sentTo('resume').length, 4, 'paused: nothing more');
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/pause`)).status, 400);
  await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`);
  // Simulate a crash mid-batch: the cursor was not saved for contacts already reached.
  await w.t0.app.store.db.updateTable('campaigns').set({ cursor: null }).where('id', '=', c.id).execute();
  await w.restart({ campaigns: { batchWindowSeconds: 60 } });
  for (let i = 0; i < 5; i++) {
    clock.advance(60_000);
    await run();
  }
  const counts = new Map<string, number>();
  for (const m of sentTo('resume')) for (const r of m.rcptTo) counts.set(r, (counts.get(r) ?? 0) + 1);
  t.is(counts.size, 10);
  t.true([...counts.values()].every((n) => n === 1), JSON.stringify([...counts]));
  t.is((await get(c.id)).status, 'SENT');
});

test.serial('validation: required fields, unknown book, unverified from, segment targeting', async (t) => {
  const bookId = await book('Valid', [{ email: 'seg-a@example.net', properties: { plan: 'pro' } }, { email: 'seg-b@example.net', properties: { plan: 'free' } }]);
  for (const body of [
    { from: `a@${w.domain.name}`, subject: 's', contactBookId: bookId, html: '<p>x</p>' },
    { name: 'n', subject: 's', contactBookId: bookId, html: '<p>x</p>' },
    { name: 'n', from: `a@${w.domain.name}`, contactBookId: bookId, html: '<p>x</p>' },
    { name: 'n', from: `a@${w.domain.name}`, subject: 's', html: '<p>x</p>' },
    // Without a body only a draft is made (spec-conformance-campaigns): one to send now is refused.
    { name: 'n', from: `a@${w.domain.name}`, subject: 's', contactBookId: bookId, sendNow: true },
    { name: 'n', from: `a@${w.domain.name}`, subject: 's', contactBookId: 'cb_nope', html: '<p>x</p>' },
    { name: 'n', from: `a@${w.domain.name}`, subject: 's', contactBookId: bookId, content: '{bad json' },
    { name: 'n', from: `a@${w.domain.name}`, subject: 's', contactBookId: bookId, html: '<p>x</p>', batchSize: 0 },
    // A sender name no header line can hold (a 950-letter word; 600 backslashes, each written escaped)
    // would fail every message: refused here, as a send refuses it.
    { name: 'n', from: `${'x'.repeat(950)} <a@${w.domain.name}>`, subject: 's', contactBookId: bookId, html: '<p>x</p>' },
    { name: 'n', from: `${'\\'.repeat(600)} <a@${w.domain.name}>`, subject: 's', contactBookId: bookId, html: '<p>x</p>' },
    // Nor a subject whose words outside its placeholders are too long, whatever the contact's data.
    { name: 'n', from: `a@${w.domain.name}`, subject: `Hi {{firstName}} ${'x'.repeat(950)}`, contactBookId: bookId, html: '<p>x</p>' },
  ]) {
    const res = await w.t0.request('POST', '/v1/campaigns', { body });
    t.is(res.status, 400, JSON.stringify(body));
  }
  t.is((await w.t0.request('POST', '/v1/campaigns', { body: { name: 'n', from: 'a@unverified.dev', subject: 's', contactBookId: bookId, html: '<p>x</p>' } })).status, 403);
  const seg = await w.t0.request('POST', '/v1/segments', { body: { name: 'Pro', contactBookId: bookId, filters: { match: 'all', conditions: [{ field: 'properties.plan', op: 'eq', value: 'pro' }] } } });
  t.is(seg.status, 200, JSON.stringify(seg.body));
  const c = await campaign(bookId, { segmentId: seg.body.id, html: '<p>Only pros {{unsubscribeUrl}}</p>', content: undefined, sendNow: true });
  await run();
  await run();
  t.is(sentTo('seg-a@').length, 1);
  t.is(sentTo('seg-b@').length, 0);
  t.is((await get(c.id)).total, 1);
});

test.serial('unsubscribe by mail (the List-Unsubscribe mailto) and a hard bounce both unsubscribe the contact', async (t) => {
  const { createTransport } = await import('nodemailer');
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'dead@example.net' ? { code: 550, message: '5.1.1 <dead@example.net>: user unknown' } : undefined) });
  try {
    const bookId = await book('ByMail', [{ email: 'mailto@example.net' }, { email: 'dead@example.net' }]);
    const c = await campaign(bookId, { sendNow: true });
    await run();
    await run();
    const raw = sentTo('mailto@')[0]!.raw.toString().replace(/\r\n[ \t]+/g, ' ');
    const mailto = /<mailto:([^>]+)>/.exec(raw)![1]!;
    const transport = createTransport({ host: '127.0.0.1', port: w.t0.app.listeners.inbound!.port, secure: false, ignoreTLS: true });
    const info = await transport.sendMail({ from: 'mailto@example.net', to: mailto, subject: 'unsubscribe', text: 'unsubscribe' });
    t.regex(String(info.response), /^250/);
    transport.close();
    // An unknown token is refused at RCPT.
    const bad = createTransport({ host: '127.0.0.1', port: w.t0.app.listeners.inbound!.port, secure: false, ignoreTLS: true });
    await t.throwsAsync(bad.sendMail({ from: 'x@example.net', to: 'unsubscribe+forged.token@mx.posthorn.test', subject: 's', text: 't' }));
    bad.close();
    const contacts = (await w.t0.request('GET', `/v1/contactBooks/${bookId}/contacts`)).body;
    const byEmail = (e: string) => contacts.find((x: any) => x.email === e);
    t.false(byEmail('mailto@example.net').subscribed);
    t.false(byEmail('dead@example.net').subscribed);
    t.is(byEmail('dead@example.net').unsubscribeReason, 'BOUNCED');
    const got = await get(c.id);
    t.is(got.unsubscribed, 1);
    t.is(got.bounced, 1);
    t.is(got.hardBounced, 1, 'a 5xx at RCPT is a hard bounce');
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
});

test.serial("a campaign's segment filters its own book only: a book change that strands the segment is 400, and a draft whose segment was deleted is not scheduled", async (t) => {
  const first = await book('Seg first', [{ email: 'sf1@example.net' }, { email: 'sf2@example.net' }]);
  const second = await book('Seg second', [{ email: 'ss1@example.net' }]);
  const seg = (await w.t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: first, filters: { match: 'all', conditions: [{ field: 'email', op: 'eq', value: 'sf1@example.net' }] } } })).body;
  const c = await campaign(first, { segmentId: seg.id });
  const moved = await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { contactBookId: second } });
  t.is(moved.status, 400);
  t.regex(moved.body.error.message, /^segmentId: .*another contact book/);
  // Both at once is fine.
  t.is((await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { contactBookId: second, segmentId: null } })).status, 200);
  t.is((await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { contactBookId: first, segmentId: seg.id } })).status, 200);
  // The segment goes away before the send: never the whole book, and not nobody in silence either.
  t.is((await w.t0.request('DELETE', `/v1/segments/${seg.id}`)).status, 200);
  const refused = await w.t0.request('POST', `/v1/campaigns/${c.id}/schedule`, { body: {} });
  t.is(refused.status, 400);
  t.is(refused.body.error.message, `segmentId: segment ${seg.id} no longer exists`);
  await run();
  const after = await get(c.id);
  t.is(after.status, 'DRAFT');
  t.is(after.segmentId, seg.id);
  t.is(sentTo('sf').length, 0);
});

test.serial('a second unsubscribe of an unsubscribed contact (a click after the one-click POST) changes nothing and announces nothing', async (t) => {
  const bookId = await book('Unsub twice', [{ email: 'ut1@example.net' }]);
  await campaign(bookId, { sendNow: true });
  await run();
  const path = new URL(/List-Unsubscribe: <([^>]+)>/.exec(sentTo('ut1@')[0]!.raw.toString().replace(/\r\n[ \t]+/g, ' '))![1]!).pathname;
  const seen: string[] = [];
  const off = w.t0.app.services.events.on('contact.updated', (e) => {
    seen.push(String(e.data.id));
  });
  t.teardown(() => off?.());
  t.is((await w.t0.request('POST', path, { key: null })).status, 200);
  const contact = () => w.t0.request('GET', `/v1/contactBooks/${bookId}/contacts`).then((r) => r.body[0]);
  const first = await contact();
  t.like(first, { subscribed: false, unsubscribeReason: 'UNSUBSCRIBED' });
  t.is(seen.length, 1);
  clock.advance(60_000);
  const again = await w.t0.request('POST', path, { key: null });
  t.is(again.status, 200, 'still the page that says so');
  t.regex(String(again.body), /You are unsubscribed/);
  t.is(seen.length, 1, 'no contact.updated for a write that changed nothing');
  t.is((await contact()).updatedAt, first.updatedAt);
});

test.serial('the unsubscribe page posts back to the address it was opened at, also under a publicUrl with a path (behind a proxy)', async (t) => {
  const bookId = await book('Unsub prefix', [{ email: 'up1@example.net' }]);
  await campaign(bookId, { sendNow: true });
  await run();
  const path = new URL(/List-Unsubscribe: <([^>]+)>/.exec(sentTo('up1@')[0]!.raw.toString().replace(/\r\n[ \t]+/g, ' '))![1]!).pathname;
  const page = String((await w.t0.request('GET', path, { key: null })).body);
  const form = /<form\b[^>]*>/.exec(page)![0];
  const action = /\saction="([^"]*)"/.exec(form)?.[1]?.replace(/&amp;/g, '&');
  // POSTHORN_PUBLIC_URL may carry a path ("https://example.com/mail", a proxy taking it off):
  // the browser resolves the form's target against the page's address, which has that path.
  for (const opened of [`http://posthorn.test${path}`, `https://example.com/mail${path}`]) {
    t.is(new URL(action ?? '', opened).href, opened, `opened at ${opened}`);
  }
});

test.serial('an unsubscribe link of a contact deleted since unsubscribes the address if it is in the book again, and says unsubscribed if it is not', async (t) => {
  const bookId = await book('Deleted contact', [{ email: 'dc1@example.net' }, { email: 'dc2@example.net' }]);
  const c = await campaign(bookId, { sendNow: true });
  await run();
  const path = (prefix: string) => new URL(/List-Unsubscribe: <([^>]+)>/.exec(sentTo(prefix)[0]!.raw.toString().replace(/\r\n[ \t]+/g, ' '))![1]!).pathname;
  const contacts = async () => (await w.t0.request('GET', `/v1/contactBooks/${bookId}/contacts`)).body as any[];
  for (const x of await contacts()) t.is((await w.t0.request('DELETE', `/v1/contactBooks/${bookId}/contacts/${x.id}`)).status, 200);
  // dc1 is imported again (a new contact, a new id); dc2 stays deleted.
  t.is((await w.t0.request('POST', `/v1/contactBooks/${bookId}/contacts`, { body: { email: 'dc1@example.net' } })).status, 200);
  const one = await w.t0.request('POST', path('dc1@'), { key: null });
  t.is(one.status, 200);
  t.regex(String(one.body), /You are unsubscribed/);
  t.like((await contacts()).find((x) => x.email === 'dc1@example.net'), { subscribed: false, unsubscribeReason: 'UNSUBSCRIBED' });
  t.is((await get(c.id)).unsubscribed, 1);
  // A mail client's one-click POST for an address no longer in the book: nothing is sent to it, so it is unsubscribed.
  const two = await fetch(`${w.t0.baseUrl}${path('dc2@')}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
  t.is(two.status, 200);
  t.is((await contacts()).length, 1);
  // The next campaign to the book reaches neither.
  await campaign(bookId, { sendNow: true });
  await run();
  t.is(sentTo('dc').length, 2);
});

test.serial('the unsubscribe page names the subject the reader got, not the campaign\'s template with its {{placeholders}}', async (t) => {
  const bookId = await book('Unsub subject', [{ email: 'us1@example.net', firstName: 'Ann & Bo' }, { email: 'us2@example.net' }]);
  await campaign(bookId, { sendNow: true });
  await run();
  const path = (prefix: string) => new URL(/List-Unsubscribe: <([^>]+)>/.exec(sentTo(prefix)[0]!.raw.toString().replace(/\r\n[ \t]+/g, ' '))![1]!).pathname;
  const ann = String((await w.t0.request('GET', path('us1@'), { key: null })).body);
  t.true(ann.includes('“Hello Ann &amp; Bo”'), ann);
  const other = String((await w.t0.request('GET', path('us2@'), { key: null })).body);
  t.true(other.includes('“Hello friend”'));
  t.false(other.includes('{{'));
});

test.serial('unsubscribe links keep working after the campaign is deleted (link, one-click POST and mailto)', async (t) => {
  const { createTransport } = await import('nodemailer');
  const bookId = await book('Deleted later', [{ email: 'dl1@example.net' }, { email: 'dl2@example.net' }, { email: 'dl3@example.net' }]);
  const c = await campaign(bookId, { sendNow: true });
  await run();
  t.is(sentTo('dl').length, 3);
  const unfolded = (prefix: string) => sentTo(prefix)[0]!.raw.toString().replace(/\r\n[ \t]+/g, ' ');
  const path = (prefix: string) => new URL(/List-Unsubscribe: <([^>]+)>/.exec(unfolded(prefix))![1]!).pathname;
  t.is((await w.t0.request('DELETE', `/v1/campaigns/${c.id}`)).status, 200);
  // The page still offers the unsubscribe; POST (the page's button or a one-click) still unsubscribes.
  const page = await w.t0.request('GET', path('dl1@'), { key: null });
  t.is(page.status, 200);
  t.regex(String(page.body), /<form method="post"/);
  t.is((await w.t0.request('POST', path('dl1@'), { key: null })).status, 200);
  const oneClick = await fetch(`${w.t0.baseUrl}${path('dl2@')}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
  t.is(oneClick.status, 200);
  const mailto = /<mailto:([^>]+)>/.exec(unfolded('dl3@'))![1]!;
  const transport = createTransport({ host: '127.0.0.1', port: w.t0.app.listeners.inbound!.port, secure: false, ignoreTLS: true });
  await transport.sendMail({ from: 'dl3@example.net', to: mailto, subject: 'unsubscribe', text: 'unsubscribe' });
  transport.close();
  const contacts = (await w.t0.request('GET', `/v1/contactBooks/${bookId}/contacts`)).body as any[];
  for (const e of ['dl1@example.net', 'dl2@example.net', 'dl3@example.net']) t.false(contacts.find((x) => x.email === e).subscribed, e);
  // A later campaign to the same book reaches none of them.
  await campaign(bookId, { sendNow: true });
  await run();
  t.is(sentTo('dl').length, 3);
});

test.serial('a campaign rescheduled while its due batch is being started stays scheduled for the new time', async (t) => {
  const bookId = await book('Race', [{ email: 'race1@example.net' }, { email: 'race2@example.net' }]);
  // Due a minute from now: the app's own runner (a real-time tick every second) never sees it
  // due, and only the racing runner below, whose clock is two minutes ahead, starts it.
  const c = await campaign(bookId, { scheduledAt: new Date(clock.nowMs() + 60_000).toISOString() });
  const app = w.t0.app;
  const repo = createCampaignsRepository(app.store.db);
  let rescheduled: Awaited<ReturnType<typeof w.t0.request>> | undefined;
  // A second runner over the same store whose start of this campaign is interleaved with a
  // schedule request: the batch was claimed as due, then the request moves it an hour on.
  const racing = createCampaignService({
    campaigns: {
      ...repo,
      async countEligible(row, filter) {
        const n = await repo.countEligible(row, filter);
        if (row.id === c.id && !rescheduled) rescheduled = await w.t0.request('POST', `/v1/campaigns/${c.id}/schedule`, { body: { scheduledAt: 'in 1 hour' } });
        return n;
      },
    },
    contactBooks: createContactBooksRepository(app.store.db),
    segments: createSegmentsRepository(app.store.db),
    contacts: app.services.contacts,
    emails: app.services.emails,
    domains: app.services.domains,
    events: app.services.events,
    clock: new ManualClock(clock.nowMs() + 120_000),
    logger: app.logger,
    secret: app.secret,
    publicUrl: app.config.publicUrl,
    hostname: app.config.hostname,
    batchWindowMs: 60_000,
    owner: 'racing-runner',
  });
  await racing.tick();
  await w.settle();
  t.is(rescheduled?.status, 200);
  t.is((rescheduled?.body as any)?.campaign.status, 'SCHEDULED');
  t.is((await get(c.id)).status, 'SCHEDULED', 'the answer the client got holds');
  t.is(sentTo('race').length, 0, 'nothing sent before the new time');
  clock.advance(3600_000);
  await run();
  await run();
  t.is((await get(c.id)).status, 'SENT');
  t.is(sentTo('race').length, 2);
});

test.serial('a draft whose preview text alone is edited is sent with the new preview text', async (t) => {
  const bookId = await book('Preheader', [{ email: 'preheader@example.net' }]);
  const c = await campaign(bookId, { previewText: 'Old teaser' });
  t.regex(c.html, /Old teaser/);
  const patched = await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { previewText: 'New teaser' } });
  t.is(patched.status, 200);
  t.is(patched.body.previewText, 'New teaser');
  t.regex(patched.body.html, /New teaser/);
  t.notRegex(patched.body.html, /Old teaser/);
  // Cleared: no preheader at all, not the one before.
  const cleared = await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { previewText: null } });
  t.notRegex(cleared.body.html, /teaser/);
  t.is((await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { previewText: 'New teaser' } })).status, 200);
  t.true((await w.t0.request('POST', `/v1/campaigns/${c.id}/schedule`, { body: {} })).body.success);
  await run();
  const html = String((await simpleParser(sentTo('preheader@')[0]!.raw)).html);
  t.regex(html, /New teaser/);
  t.notRegex(html, /Old teaser/);
});

test.serial('PATCH html on a draft written as editor content replaces the body; content and html together are refused', async (t) => {
  const bookId = await book('Html over content', [{ email: 'htmlpatch@example.net' }]);
  const c = await campaign(bookId);
  t.truthy(c.content);
  const patched = await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { html: '<p>The new body {{unsubscribeUrl}}</p>' } });
  t.is(patched.status, 200);
  t.regex(patched.body.html, /The new body/);
  t.is(patched.body.content, null, 'the editor document no longer describes the body');
  // Both at once: which one is the body is not guessed.
  for (const [method, path, extra] of [
    ['PATCH', `/v1/campaigns/${c.id}`, {}],
    ['POST', '/v1/campaigns', { name: 'Both', from: `news@${w.domain.name}`, subject: 'S', contactBookId: bookId }],
  ] as const) {
    const both = await w.t0.request(method, path, { body: { ...extra, content: doc(para(text('Editor'))), html: '<p>Given</p>' } });
    t.is(both.status, 400, method);
    t.is(both.body.error.code, 'BAD_REQUEST');
    t.regex(both.body.error.message, /^html: give either content or html, not both/);
  }
  t.regex((await get(c.id)).html, /The new body/, 'the refused PATCH changed nothing');
  t.true((await w.t0.request('POST', `/v1/campaigns/${c.id}/schedule`, { body: {} })).body.success);
  await run();
  const sent = await simpleParser(sentTo('htmlpatch@')[0]!.raw);
  t.regex(String(sent.html), /The new body/);
  t.notRegex(String(sent.html), /Body/);
  t.regex(String(sent.text), /The new body/);
});

test.serial('a campaign given HTML over the conversion bound, or nested too deeply for the converter, is taken and sent HTML-only (its footer link in the HTML)', async (t) => {
  const big = '<p>Paragraph of ordinary newsletter text, nothing special in it.</p>'.repeat(Math.ceil((256 * 1024) / 66) + 10);
  const deep = `${'<div>'.repeat(20_000)}deep${'</div>'.repeat(20_000)}`;
  const cases = [
    ['bigcampaign@example.net', big],
    ['deepcampaign@example.net', deep],
  ] as const;
  for (const [email, html] of cases) {
    const bookId = await book(`HTML-only ${email}`, [{ email }]);
    // Taken on create and on update alike (not a 500).
    const c = await campaign(bookId, { content: undefined, html: '<p>draft</p>' });
    const patched = await w.t0.request('PATCH', `/v1/campaigns/${c.id}`, { body: { html } });
    t.is(patched.status, 200, email);
    const created = await w.t0.request('POST', '/v1/campaigns', {
      body: { name: 'Big', from: `news@${w.domain.name}`, subject: 'S', contactBookId: bookId, html },
    });
    t.is(created.status, 200, email);
    t.true((await w.t0.request('POST', `/v1/campaigns/${c.id}/schedule`, { body: {} })).body.success);
    await run();
    const sent = sentTo(email.split('@')[0]! + '@');
    t.is(sent.length, 1, email);
    const raw = sent[0]!.raw;
    t.is(await w.dkimStatus(raw), 'pass');
    t.false(raw.toString('latin1').includes('text/plain'), `${email}: no text part`);
    const parsed = await simpleParser(raw, { skipHtmlToText: true });
    t.regex(String(parsed.html), /http:\/\/posthorn\.test\/unsubscribe\//, 'the footer link is in the HTML');
  }
});

test.serial('an editor campaign with its own unsubscribe link (variable, link, footer node) has that one link in each part', async (t) => {
  const linked = (label: string) => ({ type: 'text', text: label, marks: [{ type: 'link', attrs: { href: '{{unsubscribeUrl}}' } }] });
  const cases = [
    ['ownvariable@example.net', doc(para(text('Body. Leave: '), { type: 'variable', attrs: { id: 'unsubscribeUrl' } }))],
    ['ownliteral@example.net', doc(para(text('Body. Leave: {{unsubscribeUrl}}')))],
    ['ownlegacy@example.net', doc(para(text('Body. Leave: '), { type: 'variable', attrs: { id: 'usesend_unsubscribe_url' } }))],
    ['ownlink@example.net', doc(para(text('Body. '), linked('Leave the list')))],
    ['ownfooter@example.net', doc(para(text('Body')), { type: 'unsubscribeFooter', content: [text('You get this as a subscriber.')] })],
    ['ownfooterlink@example.net', doc(para(text('Body')), { type: 'unsubscribeFooter', content: [text('No more? '), linked('Unsubscribe here')] })],
    // The editor's footer node whose own text already carries the link: no second one.
    ['footervariable@example.net', doc(para(text('Body')), { type: 'unsubscribeFooter', content: [text('Leave: '), { type: 'variable', attrs: { id: 'unsubscribeUrl' } }] })],
    ['footerliteral@example.net', doc(para(text('Body')), { type: 'unsubscribeFooter', content: [text('Leave: {{unsubscribeUrl}}')] })],
    ['footerlegacy@example.net', doc(para(text('Body')), { type: 'unsubscribeFooter', content: [{ type: 'text', text: 'Leave', marks: [{ type: 'link', attrs: { href: '{{usesend_unsubscribe_url}}' } }] }] })],
  ] as const;
  for (const [email, content] of cases) {
    const bookId = await book(`Own link ${email}`, [{ email }]);
    await campaign(bookId, { sendNow: true, content });
    await run();
    const sent = sentTo(email.split('@')[0]! + '@');
    t.is(sent.length, 1, email);
    const parsed = await simpleParser(sent[0]!.raw, { skipHtmlToText: true });
    const links = (s: unknown) => (String(s ?? '').match(/http:\/\/posthorn\.test\/unsubscribe\/[A-Za-z0-9._~-]+/g) ?? []).length;
    t.is(links(parsed.text), 1, `${email}: one unsubscribe URL in the text part: ${String(parsed.text)}`);
    t.is(links(parsed.html), 1, `${email}: one unsubscribe URL in the HTML part`);
    t.notRegex(String(parsed.text), /\n--\nUnsubscribe:/, `${email}: no footer line added`);
  }
});
