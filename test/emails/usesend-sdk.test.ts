import test from 'ava';
import { simpleParser } from 'mailparser';
import { UseSend } from 'usesend-js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { publishRecords } from '../helpers/domain-fixtures.js';

// Posthorn is a drop-in server for the usesend-js SDK: it appends /api/v1 to the base URL.
const sdkCode = (e: unknown) => (e as { error?: { code?: string }; code?: string }).error?.code ?? (e as { code?: string }).code;
let w: MailWorld;
let sdk: UseSend;
test.before(async () => {
  w = await startMailWorld();
  sdk = new UseSend(w.t0.key, w.t0.baseUrl);
});
test.after.always(async () => {
  await w?.close();
});

test.serial('emails: send, get, batch, schedule, update, cancel', async (t) => {
  const sent = await sdk.emails.send({ from: `hello@${w.domain.name}`, to: 'sdk@example.net', subject: 'From the SDK', html: '<p>Hi</p>' });
  t.is(sent.error, null);
  t.regex(sent.data!.emailId!, /^em_/);
  await w.sink.waitForMessages(1);
  const got = await sdk.emails.get(sent.data!.emailId!);
  t.is(got.error, null);
  t.is(got.data!.subject, 'From the SDK');
  t.true(Array.isArray(got.data!.emailEvents));

  const idem = await sdk.emails.send({ from: `hello@${w.domain.name}`, to: 'sdk@example.net', subject: 'Once', text: 'x' }, { idempotencyKey: 'sdk-1' });
  const idem2 = await sdk.emails.send({ from: `hello@${w.domain.name}`, to: 'sdk@example.net', subject: 'Once', text: 'x' }, { idempotencyKey: 'sdk-1' });
  t.is(idem2.data!.emailId, idem.data!.emailId!);

  const batch = await sdk.emails.batch([
    { from: `hello@${w.domain.name}`, to: 'b1@example.net', subject: 'B1', text: 'one' },
    { from: `hello@${w.domain.name}`, to: 'b2@example.net', subject: 'B2', text: 'two' },
  ]);
  t.is(batch.error, null);
  t.is(batch.data!.length, 2);

  const scheduled = await sdk.emails.send({ from: `hello@${w.domain.name}`, to: 'later@example.net', subject: 'Later', text: 'x', scheduledAt: new Date(Date.now() + 3600_000).toISOString() });
  const updated = await sdk.emails.update(scheduled.data!.emailId!, { scheduledAt: new Date(Date.now() + 7200_000).toISOString() });
  t.is(updated.error, null);
  t.is(updated.data!.emailId, scheduled.data!.emailId!);
  const cancelled = await sdk.emails.cancel(scheduled.data!.emailId!);
  t.is(cancelled.error, null);
  t.is(((await sdk.emails.get(scheduled.data!.emailId!)).data as { latestStatus?: string }).latestStatus, "CANCELLED");

  const bad = await sdk.emails.send({ from: 'nobody@unknown.dev', to: 'x@example.net', subject: 's', text: 't' });
  t.is(bad.data, null);
  // The SDK wraps the whole error body: {error: {code, message}}.
  t.is(sdkCode(bad.error), 'FORBIDDEN');
});

test.serial('domains: create, list, get, verify, delete', async (t) => {
  const created = await sdk.domains.create({ name: 'sdk-domain.dev', region: 'us-east-1' });
  t.is(created.error, null);
  const id = created.data!.id;
  t.true((await sdk.domains.list()).data!.some((d: { id: number }) => d.id === id));
  publishRecords(w.t0, created.data as never);
  const verified = await sdk.domains.verify(id);
  t.is(verified.error, null);
  t.is(typeof verified.data!.message, 'string');
  t.is((await sdk.domains.get(id)).data!.status, 'SUCCESS');
  const deleted = await sdk.domains.delete(id);
  t.deepEqual(deleted.data, { id, success: true, message: 'Domain deleted successfully' });
  const again = await sdk.domains.delete(id);
  t.is(sdkCode(again.error), 'NOT_FOUND');
});

test.serial("campaigns: html written for useSend sends every contact its own unsubscribe link, in the body as in List-Unsubscribe", async (t) => {
  const book = await sdk.contactBooks.create({ name: 'SDK news' });
  t.is(book.error, null);
  for (const email of ['placeholder@example.net', 'nolink@example.net']) t.is((await sdk.contacts.create(book.data!.id, { email })).error, null);
  const from = `news@${w.domain.name}`;
  // useSend's placeholder in an href, and a body with no link at all (it gets the footer).
  const bodies = { placeholder: '<p>News</p><a href="{{usesend_unsubscribe_url}}">Unsubscribe</a>', nolink: '<p>News without a link</p>' };
  for (const [name, html] of Object.entries(bodies)) {
    const made = await sdk.campaigns.create({ name, from, subject: 'News', contactBookId: book.data!.id, html, sendNow: true });
    t.is(made.error, null);
  }
  await w.t0.app.runCampaigns();
  await w.settle();
  for (const name of Object.keys(bodies)) {
    // Each campaign mails both contacts; look at the one named like it.
    const m = w.sink.messages.find((x) => x.rcptTo.includes(`${name}@example.net`) && x.raw.toString().includes(name === 'nolink' ? 'without a link' : '<p>News</p>'));
    t.truthy(m, `${name}: sent`);
    const raw = m!.raw.toString().replace(/\r\n[ \t]+/g, ' '); // unfold (RFC 5322 2.2.3)
    const url = /List-Unsubscribe: <(http[^>]+)>/.exec(raw)![1]!;
    const html = String((await simpleParser(m!.raw)).html);
    t.true(html.includes(`href="${url}"`), `${name}: the body links to ${url}: ${html}`);
    t.false(html.includes('href=""'), `${name}: no empty link`);
  }
});

test.serial('contact books, contacts, campaigns and analytics: every other SDK method answers data, not an error', async (t) => {
  const ok = <T>(r: { data: T | null; error: unknown }, what: string): T => {
    t.is(r.error, null, what);
    return r.data!;
  };
  const book = ok(await sdk.contactBooks.create({ name: 'SDK book', variables: ['plan'] }), 'contactBooks.create');
  t.true(ok(await sdk.contactBooks.list(), 'contactBooks.list').some((b) => b.id === book.id));
  t.is(ok(await sdk.contactBooks.get(book.id), 'contactBooks.get')._count?.contacts, 0);
  t.is(ok(await sdk.contactBooks.update(book.id, { name: 'SDK book 2' }), 'contactBooks.update').name, 'SDK book 2');

  const contactId = ok(await sdk.contacts.create(book.id, { email: 'sdk-c1@example.net', firstName: 'Ann', properties: { plan: 'pro' } }), 'contacts.create').contactId!;
  t.deepEqual(ok(await sdk.contacts.get(book.id, contactId), 'contacts.get').properties, { plan: 'pro' });
  t.is(ok(await sdk.contacts.update(book.id, contactId, { lastName: 'Lee' }), 'contacts.update').contactId, contactId);
  t.is(ok(await sdk.contacts.upsert(book.id, contactId, { email: 'sdk-c1@example.net', subscribed: true }), 'contacts.upsert').contactId, contactId);
  t.is(ok(await sdk.contacts.bulkCreate(book.id, [{ email: 'sdk-b1@example.net' }, { email: 'sdk-b2@example.net' }]), 'contacts.bulkCreate').count, 2);
  const bulk = ok(await sdk.get<{ id: string }[]>(`/contactBooks/${book.id}/contacts?emails=sdk-b1@example.net,sdk-b2@example.net`), 'contacts list').map((c) => c.id);
  t.deepEqual(ok(await sdk.contacts.bulkDelete(book.id, { contactIds: bulk }), 'contacts.bulkDelete'), { success: true, count: 2 });

  const html = '<p>Hi {{firstName}}</p><a href="{{usesend_unsubscribe_url}}">Unsubscribe</a>';
  const campaign = ok(await sdk.campaigns.create({ name: 'SDK launch', from: `news@${w.domain.name}`, subject: 'Launch', contactBookId: book.id, html }), 'campaigns.create');
  t.is(campaign.status, 'DRAFT');
  t.true(ok(await sdk.campaigns.getAll({ page: '1', status: 'DRAFT', search: 'SDK launch' }), 'campaigns.getAll').campaigns.some((c) => c.id === campaign.id));
  t.is(ok(await sdk.campaigns.get(campaign.id), 'campaigns.get').id, campaign.id);
  t.true(ok(await sdk.campaigns.schedule(campaign.id, { scheduledAt: 'in 2 hours', batchSize: 10 }), 'campaigns.schedule').success);
  t.is(ok(await sdk.campaigns.get(campaign.id), 'campaigns.get').batchSize, 10);
  t.is(ok(await sdk.campaigns.delete(campaign.id), 'campaigns.delete').id, campaign.id);

  t.is(ok(await sdk.analytics.emailTimeSeries({ days: '7', domainId: String(w.domain.id) }), 'analytics.emailTimeSeries').result.length, 7);
  t.is(typeof ok(await sdk.analytics.reputationMetrics({ domainId: String(w.domain.id) }), 'analytics.reputationMetrics').bounceRate, 'number');

  t.deepEqual(ok(await sdk.contacts.delete(book.id, contactId), 'contacts.delete'), { success: true });
  t.is(sdkCode((await sdk.contacts.delete(book.id, contactId)).error), 'NOT_FOUND');
  t.true(ok(await sdk.contactBooks.delete(book.id), 'contactBooks.delete').success);
});

test.serial('contacts looked up by emails or ids (up to 1000) come back all, not a first page of 25; an explicit limit still pages', async (t) => {
  const book = (await sdk.contactBooks.create({ name: 'SDK lookup' })).data!;
  const emails = Array.from({ length: 40 }, (_, i) => `look-${i}@example.net`);
  t.is((await sdk.contacts.bulkCreate(book.id, emails.map((email) => ({ email })))).data!.count, 40);
  const byEmail = await sdk.get<{ id: string; email: string }[]>(`/contactBooks/${book.id}/contacts?emails=${emails.join(',')}`);
  t.is(byEmail.error, null);
  t.deepEqual(byEmail.data!.map((c) => c.email).sort(), [...emails].sort());
  const ids = byEmail.data!.map((c) => c.id);
  t.is((await sdk.get<unknown[]>(`/contactBooks/${book.id}/contacts?ids=${ids.join(',')}`)).data!.length, 40);
  t.is((await sdk.get<unknown[]>(`/contactBooks/${book.id}/contacts?ids=${ids.join(',')}&limit=10&page=4`)).data!.length, 10);
  // Without a filter the list is still paged (default 25).
  t.is((await sdk.get<unknown[]>(`/contactBooks/${book.id}/contacts`)).data!.length, 25);
  t.true((await sdk.contactBooks.delete(book.id)).data!.success);
});

test.serial('campaigns.pause and campaigns.resume answer {success: true} on a running campaign; a wrong state is an error the SDK reads', async (t) => {
  const book = (await sdk.contactBooks.create({ name: 'SDK pause' })).data!;
  await sdk.contacts.bulkCreate(book.id, [{ email: 'pause-1@example.net' }, { email: 'pause-2@example.net' }, { email: 'pause-3@example.net' }]);
  const html = '<p>Hi</p><a href="{{usesend_unsubscribe_url}}">Unsubscribe</a>';
  const campaign = (await sdk.campaigns.create({ name: 'SDK pause', from: `news@${w.domain.name}`, subject: 'Pause', contactBookId: book.id, html, sendNow: true, batchSize: 1 })).data!;
  await w.t0.app.runCampaigns();
  t.is((await sdk.campaigns.get(campaign.id)).data!.status, 'RUNNING');
  t.like(await sdk.campaigns.pause(campaign.id), { data: { success: true }, error: null });
  t.is((await sdk.campaigns.get(campaign.id)).data!.status, 'PAUSED');
  t.like(await sdk.campaigns.resume(campaign.id), { data: { success: true }, error: null });
  const again = await sdk.campaigns.resume(campaign.id);
  t.is(again.data, null);
  t.is(sdkCode(again.error), 'BAD_REQUEST');
  t.is(typeof (again.error as unknown as { error: { message: string } }).error.message, 'string');
});

test.serial("campaign variables are read as useSend reads them: case ignored, with or without contact.", async (t) => {
  const book = (await sdk.contactBooks.create({ name: 'SDK case', variables: ['plan'] })).data!;
  await sdk.contacts.create(book.id, { email: 'case-1@example.net', firstName: 'Ann', properties: { plan: 'pro' } });
  const html = '<p>[{{FIRSTNAME}}|{{firstname}}|{{Contact.FirstName}}|{{PLAN}}|{{Email}}|{{firstName}}]</p><a href="{{usesend_unsubscribe_url}}">u</a>';
  t.is((await sdk.campaigns.create({ name: 'SDK case', from: `news@${w.domain.name}`, subject: 'Hi {{FirstName,fallback=you}}', contactBookId: book.id, html, sendNow: true })).error, null);
  await w.t0.app.runCampaigns();
  await w.settle();
  const m = w.sink.messages.find((x) => x.rcptTo.includes('case-1@example.net'));
  t.truthy(m);
  const parsed = await simpleParser(m!.raw);
  t.is(parsed.subject, 'Hi Ann');
  t.true(String(parsed.html).includes('[Ann|Ann|Ann|pro|case-1@example.net|Ann]'), String(parsed.html));
});
