import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { ConsoleClient, consoleUser } from './helpers/console-client.js';

// The console's forms do what they say, checked through the API they share the core with:
// keys, contacts, export, templates, campaigns, suppressions and the operator's queue.

let t0: TestApp;
let c: ConsoleClient;

test.before(async () => {
  t0 = await startTestApp();
  await addVerifiedDomain(t0, 'acts.dev');
  await consoleUser(t0.app, 'op@acts.dev', t0.teamId, true);
  c = new ConsoleClient(t0.baseUrl);
  await c.signIn('op@acts.dev');
});
test.after.always(async () => {
  await t0?.close();
});

/** The id in a redirect to /console/<kind>/<id>. */
const idIn = (location: string | null, kind: string) => new RegExp(`/console/${kind}/([^/?]+)`).exec(location ?? '')![1]!;

test.serial('API keys: the key is shown once, on the answer to the form, and works; revoking it ends it', async (t) => {
  const created = await c.post('/console/api-keys', { name: 'from the console', permission: 'SENDING', domainId: '' });
  t.is(created.status, 200);
  t.is(created.headers.get('cache-control'), 'no-store');
  const token = /id="new-key-value">(ph_[^<]+)</.exec(created.text)![1]!;
  t.is((await t0.request('GET', '/v1/emails', { key: token })).status, 200);
  t.is((await t0.request('GET', '/v1/domains', { key: token })).status, 403); // SENDING, as chosen
  const list = await c.get('/console/api-keys');
  t.false(list.text.includes(token));
  const keyId = (await t0.app.services.apiKeys.list(t0.teamId)).find((k) => k.name === 'from the console')!.id;
  t.is((await c.post(`/console/api-keys/${keyId}/revoke`)).status, 303);
  t.is((await t0.request('GET', '/v1/emails', { key: token })).status, 401);
});

test.serial('API keys: a name over 200 characters is refused with its reason, as the API refuses it, and no key is made', async (t) => {
  const before = (await t0.app.services.apiKeys.list(t0.teamId)).length;
  const res = await c.post('/console/api-keys', { name: 'k'.repeat(201), permission: 'FULL', domainId: '' }, { referer: '/console/api-keys' });
  t.is(res.status, 303);
  t.is(res.location, '/console/api-keys');
  t.is(c.flash(), 'name: must be at most 200 characters');
  t.is((await t0.app.services.apiKeys.list(t0.teamId)).length, before);
  t.is((await t0.request('POST', '/v1/apiKeys', { body: { name: 'k'.repeat(201) } })).status, 400);
  // 200 is still a name
  t.is((await c.post('/console/api-keys', { name: 'k'.repeat(200), permission: 'FULL', domainId: '' })).status, 200);
});

test.serial('a refused form quoting a long value keeps its reason: the message cookie stays within the 4096 bytes a browser keeps', async (t) => {
  const domain = (await t0.app.services.domains.list({ teamId: t0.teamId, domainId: null }))[0]!;
  for (const value of ['x'.repeat(10_000), '"é\u0001'.repeat(3_000)]) {
    const res = await c.post(`/console/domains/${domain.id}/settings`, { trackingDomain: value, tlsPolicy: 'opportunistic' }, { referer: `/console/domains/${domain.id}` });
    t.is(res.status, 303);
    for (const cookie of res.headers.getSetCookie()) t.true(Buffer.byteLength(cookie) <= 4096, `a Set-Cookie of ${Buffer.byteLength(cookie)} bytes`);
    t.regex(c.flash(), /^trackingDomain: .{100,}…$/s);
    // the page it goes back to shows it
    const page = await c.get(`/console/domains/${domain.id}`);
    t.regex(page.text, /class="flash flash-error" role="alert">trackingDomain: /);
  }
  t.is((await t0.request('GET', `/v1/domains/${domain.id}`)).body.trackingDomain, null);
});

test.serial('contacts: add, edit with properties, search, refuse a bad address with its reason, export as CSV', async (t) => {
  const book = idIn((await c.post('/console/contacts', { name: 'Readers' })).location, 'contacts');
  t.is((await c.post(`/console/contacts/${book}/contacts`, { email: 'Zoe@Example.org', firstName: 'Zoë', lastName: '' })).status, 303);
  await c.post(`/console/contacts/${book}/contacts`, { email: 'max@example.org', firstName: 'Max' });
  const bad = await c.post(`/console/contacts/${book}/contacts`, { email: 'nope' }, { referer: `/console/contacts/${book}?q=x` });
  t.is(bad.status, 303);
  t.is(bad.location, `/console/contacts/${book}?q=x`); // back where the form was, with the reason
  t.regex(c.flash(), /email: "nope" is not a valid email address/);
  const zoe = (await t0.request('GET', `/v1/contactBooks/${book}/contacts?emails=zoe@example.org`)).body[0];
  const edited = await c.post(`/console/contacts/${book}/contacts/${zoe.id}`, { firstName: 'Zoë', lastName: 'Quinn', properties: 'plan=pro\ncity = Oslo', subscribed: 'on' });
  t.is(edited.status, 303);
  const after = (await t0.request('GET', `/v1/contactBooks/${book}/contacts/${zoe.id}`)).body;
  t.deepEqual([after.lastName, after.properties, after.subscribed], ['Quinn', { plan: 'pro', city: 'Oslo' }, true]);
  const unsub = await c.post(`/console/contacts/${book}/contacts/${zoe.id}`, { firstName: 'Zoë', lastName: 'Quinn', properties: 'plan=pro' });
  t.is(unsub.status, 303);
  t.false((await t0.request('GET', `/v1/contactBooks/${book}/contacts/${zoe.id}`)).body.subscribed);

  const search = await c.get(`/console/contacts/${book}?q=QUI`);
  t.true(search.text.includes('zoe@example.org'));
  t.false(search.text.includes('max@example.org'));

  const csv = await c.get(`/console/contacts/${book}/export.csv`);
  t.is(csv.status, 200);
  t.regex(csv.headers.get('content-type')!, /text\/csv/);
  t.regex(csv.headers.get('content-disposition')!, /attachment; filename="contacts-cb_/);
  const lines = csv.text.replace(/^\uFEFF/, '').trim().split('\r\n');
  // The last edit left Zoë with one property: plan.
  t.is(lines[0], 'email,firstName,lastName,subscribed,unsubscribeReason,createdAt,plan');
  t.is(lines.length, 3);
  t.true(lines.some((l) => l.startsWith('zoe@example.org,Zoë,Quinn,false,UNSUBSCRIBED,') && l.endsWith(',pro')));
  t.true(lines.some((l) => l.startsWith('max@example.org,Max,,true,,')));
});

test.serial('CSV export: a property named like an object method (toString, constructor) is an empty cell for the contacts without it', async (t) => {
  const book = idIn((await c.post('/console/contacts', { name: 'Methods' })).location, 'contacts');
  await t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email: 'has@example.org', properties: { toString: 'x', constructor: 'y' } } });
  await t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email: 'hasnot@example.org' } });
  const lines = (await c.get(`/console/contacts/${book}/export.csv`)).text.replace(/^\uFEFF/, '').trim().split('\r\n');
  t.is(lines[0], 'email,firstName,lastName,subscribed,unsubscribeReason,createdAt,constructor,toString');
  t.true(lines.some((l) => l.startsWith('has@example.org,') && l.endsWith(',y,x')));
  const without = lines.find((l) => l.startsWith('hasnot@example.org,'))!;
  t.false(without.includes('native code'), without);
  t.true(without.endsWith(',,'), without);
});

test.serial('templates: a draft written as text, previewed in a sandboxed frame, published, edited, published again and rolled back', async (t) => {
  const id = idIn((await c.post('/console/templates', { name: 'Receipt', subject: 'Your receipt' })).location, 'templates');
  const saved = await c.post(`/console/templates/${id}`, { name: 'Receipt', subject: 'Your receipt', format: 'markup', content: '# Thanks {{firstName}}\n\nYou paid **{{amount}}**.' });
  t.is(saved.status, 303);
  const preview = await c.post('/console/content/preview', { format: 'markup', content: '## Draft <script>x</script>' });
  t.is(preview.status, 200);
  t.regex(preview.headers.get('content-security-policy')!, /sandbox/);
  t.regex(preview.text, /<h2[^>]*>Draft &lt;script&gt;x&lt;\/script&gt;<\/h2>/);
  const broken = await c.post('/console/content/preview', { format: 'json', content: '{"type":"nope"}' });
  t.regex(broken.text, /cannot be rendered/);

  await c.post(`/console/templates/${id}/publish`);
  await c.post(`/console/templates/${id}`, { name: 'Receipt', subject: 'Your receipt, again', format: 'markup', content: 'Second version' });
  await c.post(`/console/templates/${id}/publish`);
  let tpl = (await t0.request('GET', `/v1/templates/${id}`)).body;
  t.is(tpl.publishedVersion, 2);
  await c.post(`/console/templates/${id}/rollback`, { versionNumber: '1' });
  tpl = (await t0.request('GET', `/v1/templates/${id}`)).body;
  t.is(tpl.publishedVersion, 1);
  // Sends use version 1 again.
  const sent = await t0.request('POST', '/v1/emails', { body: { from: 'x@acts.dev', to: 'a@example.org', templateId: id, variables: { firstName: 'Ann', amount: '$5' } } });
  const email = (await t0.request('GET', `/v1/emails/${sent.body.emailId}`)).body;
  t.is(email.subject, 'Your receipt');
  t.regex(email.html, /Thanks Ann/);
  // The editor shows the saved content as text again.
  const page = await c.get(`/console/templates/${id}`);
  t.regex(page.text, /<textarea id="f-content"[^>]*>Second version<\/textarea>/);
});

test.serial('campaigns: a draft from a template, scheduled for later, sent in batches, paused and resumed', async (t) => {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Campaign book' } })).body.id;
  await t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: [1, 2, 3].map((i) => ({ email: `c${i}@example.org` })) });
  const welcome = (await t0.app.services.templates.list(t0.teamId, { search: 'Welcome', offset: 0, limit: 1 })).items[0]!;
  const created = await c.post('/console/campaigns', { name: 'Launch', from: 'News <news@acts.dev>', contactBookId: book, segmentId: '', templateId: welcome.id, subject: '' });
  const id = idIn(created.location, 'campaigns');
  let camp = (await t0.request('GET', `/v1/campaigns/${id}`)).body;
  t.is(camp.status, 'DRAFT');
  t.is(camp.subject, welcome.subject);
  t.is(camp.content, welcome.content);

  const edited = await c.post(`/console/campaigns/${id}`, { name: 'Launch', from: 'News <news@acts.dev>', subject: 'We launched', previewText: '', contactBookId: book, segmentId: '', format: 'markup', content: 'Hello {{firstName,fallback=friend}}' });
  t.is(edited.status, 303);
  t.is((await t0.request('GET', `/v1/campaigns/${id}`)).body.subject, 'We launched');

  const later = await c.post(`/console/campaigns/${id}/schedule`, { scheduledAt: '2099-01-01T09:30', batchSize: '1' });
  t.is(later.status, 303);
  camp = (await t0.request('GET', `/v1/campaigns/${id}`)).body;
  t.deepEqual([camp.status, camp.scheduledAt, camp.batchSize], ['SCHEDULED', '2099-01-01T09:30:00.000Z', 1]);
  const bad = await c.post(`/console/campaigns/${id}/schedule`, { scheduledAt: 'tomorrow-ish', batchSize: '1' });
  t.regex(c.flash(), /scheduledAt: a date and time/);
  t.is(bad.status, 303);

  await c.post(`/console/campaigns/${id}/schedule`, { scheduledAt: '', batchSize: '1' });
  await t0.app.runCampaigns();
  camp = (await t0.request('GET', `/v1/campaigns/${id}`)).body;
  t.is(camp.status, 'RUNNING'); // one of three per batch window
  t.is((await c.post(`/console/campaigns/${id}/pause`)).status, 303);
  t.is((await t0.request('GET', `/v1/campaigns/${id}`)).body.status, 'PAUSED');
  const page = await c.get(`/console/campaigns/${id}`);
  t.regex(page.text, /action="\/console\/campaigns\/cp_[^/]+\/resume"/);
  t.notRegex(page.text, /data-live=/); // paused: nothing to watch
  await c.post(`/console/campaigns/${id}/resume`);
  t.is((await t0.request('GET', `/v1/campaigns/${id}`)).body.status, 'RUNNING');
  t.regex((await c.get(`/console/campaigns/${id}`)).text, /id="live-campaign" data-live=/);
});

test.serial('campaigns: the progress section keeps refreshing while any of the mail is on its way, and stops when the rest ended without being sent', async (t) => {
  // The destination is held so that the engine leaves the emails queued; the test moves them.
  await c.post('/console/operator/queue/suspensions', { destination: 'live.example', minutes: '30', reason: 'hold for the test' });
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Live book' } })).body.id;
  await t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: [1, 2, 3].map((i) => ({ email: `l${i}@live.example` })) });
  const created = await c.post('/console/campaigns', { name: 'Live', from: 'News <news@acts.dev>', contactBookId: book, segmentId: '', templateId: '', subject: 'Live' });
  const id = idIn(created.location, 'campaigns');
  const liveAttr = async () => /<div id="live-campaign"(?: data-live="(\d+)")?>/.exec((await c.get(`/console/campaigns/${id}`)).text)?.[1];
  t.is(await liveAttr(), undefined, 'a draft does not refresh');
  await c.post(`/console/campaigns/${id}/schedule`, { scheduledAt: '', batchSize: '100' });
  t.is(await liveAttr(), '1500', 'scheduled to start now');
  await t0.app.runCampaigns();
  const camp = (await t0.request('GET', `/v1/campaigns/${id}`)).body;
  t.deepEqual([camp.status, camp.total, camp.sent], ['SENT', 3, 0]);
  // Every batch queued, none of it sent yet: 0 of 0 delivered is not settled.
  t.is(await liveAttr(), '5000', 'SENT before the first email.sent still refreshes');
  const db = t0.app.store.db;
  const settle = async (to: string, status: 'DELIVERED' | 'BOUNCED' | 'FAILED') => {
    const rows = await db.selectFrom('campaign_recipients').innerJoin('emails', 'emails.id', 'campaign_recipients.email_id').select('emails.id').where('campaign_recipients.campaign_id', '=', id).where('emails.to_json', 'like', `%${to}%`).execute();
    t.is(rows.length, 1);
    await db.updateTable('emails').set({ latest_status: status }).where('id', '=', rows[0]!.id).execute();
  };
  // One delivered, two still queued: still moving.
  await settle('l1@', 'DELIVERED');
  await db.updateTable('campaigns').set({ sent: 1, delivered: 1 }).where('id', '=', id).execute();
  t.is(await liveAttr(), '5000');
  // The second bounced and the third was given up unsent (as an operator can, or a rejection):
  // 2 of 3 sent is the end, and the page stops asking.
  await settle('l2@', 'BOUNCED');
  await settle('l3@', 'FAILED');
  await db.updateTable('campaigns').set({ sent: 2, delivered: 1, bounced: 1 }).where('id', '=', id).execute();
  t.is(await liveAttr(), undefined, 'settled: no more refreshing');
  const hold = (await t0.app.services.queue.listSuspensions()).find((x) => x.destination === 'live.example')!;
  await c.post(`/console/operator/queue/suspensions/${hold.id}/resume`);
});

test.serial('suppressions: add, search, remove', async (t) => {
  await c.post('/console/suppressions', { email: 'Someone@Example.org' });
  await c.post('/console/suppressions', { email: 'other@example.org' });
  const tableOf = (html: string) => html.slice(html.indexOf('<tbody>'), html.indexOf('</tbody>'));
  const found = tableOf((await c.get('/console/suppressions?q=someone')).text);
  t.true(found.includes('someone@example.org'));
  t.false(found.includes('other@example.org'));
  t.is((await c.post('/console/suppressions/remove', { email: 'someone@example.org' })).status, 303);
  const left = tableOf((await c.get('/console/suppressions')).text);
  t.false(left.includes('someone@example.org'));
  t.true(left.includes('other@example.org'));
});

test.serial('operator queue: by destination; one delivery given up or retried; a destination suspended, retried, bounced and resumed; each change audited under the console user', async (t) => {
  const me = (await t0.app.services.users.list()).find((u) => u.email === 'op@acts.dev')!;
  const send = async (to: string) => (await t0.request('POST', '/v1/emails', { body: { from: 'x@acts.dev', to, subject: 'Later', text: 'x', scheduledAt: '2099-06-01T00:00:00Z' } })).body.emailId;
  const first = await send('wait1@later.example');
  const second = await send('wait2@later.example');
  const third = await send('wait3@later.example');
  const page = await c.get('/console/operator/queue');
  t.regex(page.text, /<li><span class="n">3<\/span> scheduled<\/li>/);
  t.regex(page.text, /<a class="host" href="\/console\/operator\/queue\/destinations\/later\.example"><strong>later\.example<\/strong><\/a><\/td><td>3<\/td>/);
  const destination = '/console/operator/queue/destinations/later.example';
  const listed = (await c.get(destination)).text;
  const deliveryOf = (html: string, who: string) => new RegExp(`<td>(\\d+)</td><td><a class="host" href="/console/emails/[^"]+">${who.replace('.', '\\.')}</a>`).exec(html)?.[1];
  t.regex(listed, /wait3@later\.example<\/a><\/td><td>\d+<\/td><td><span class="badge [a-z]+">scheduled<\/span>/);

  // One delivery given up: FAILED, and a second try says it is no longer queued.
  const firstDelivery = deliveryOf(listed, 'wait1@later.example')!;
  t.is((await c.post(`/console/operator/queue/deliveries/${firstDelivery}/give-up`, {}, { referer: destination })).location, destination);
  t.regex(c.flash(), /was given up and recorded as failed/);
  t.is((await t0.request('GET', `/v1/emails/${first}`)).body.latestStatus, 'FAILED');
  t.is((await c.post(`/console/operator/queue/deliveries/${firstDelivery}/give-up`)).status, 303);
  t.regex(c.flash(), new RegExp(`delivery ${firstDelivery} is not queued`));

  // Refused forms go back with the reason, naming the field.
  for (const [form, message] of [
    [{ destination: 'later.example', minutes: 'soon', reason: 'x' }, /^minutes: must be a number/],
    [{ destination: 'later.example', minutes: '0', reason: 'x' }, /^minutes: must be more than 0/],
    [{ destination: 'later.example', minutes: '30', reason: ' ' }, /^reason: must not be empty/],
    [{ destination: 'not a domain!', minutes: '30', reason: 'x' }, /^destination: must be a domain name/],
  ] as const) {
    t.is((await c.post('/console/operator/queue/suspensions', form)).status, 303);
    t.regex(c.flash(), message);
  }
  t.is((await c.get('/console/operator/queue/destinations/not_a_domain!')).status, 400);

  // Suspended: listed as such, with who did it, until when and why.
  const suspended = await c.post('/console/operator/queue/suspensions', { destination: 'LATER.example', minutes: '30', reason: 'provider asked us to wait' });
  t.is(suspended.location, destination);
  t.regex(c.flash(), /^later\.example is suspended until \d{4}-\d\d-\d\d \d\d:\d\d UTC \(0 queued deliveries held now\)\.$/);
  const held = (await c.get(destination)).text;
  t.regex(held, /provider asked us to wait/);
  t.true(held.includes(`console user ${me.id} (op@acts.dev)`));
  t.regex(held, /<span class="badge [a-z]+">suspended<\/span>/);
  t.regex((await c.get('/console/operator/queue')).text, /later\.example<\/strong><\/a><\/td><td>2<\/td><td>0<\/td><td>0<\/td><td>2<\/td>[\s\S]*?<span class="badge [a-z]+">SUSPENDED<\/span> until/);
  const [suspension] = await t0.app.services.queue.listSuspensions();
  t.is(suspension!.createdBy, `console user ${me.id} (op@acts.dev)`);

  // Retried (one, then all): a scheduled send keeps its time, whether retried alone (which
  // says so) or with its destination.
  const secondDelivery = deliveryOf(held, 'wait2@later.example')!;
  await c.post(`/console/operator/queue/deliveries/${secondDelivery}/retry`);
  t.regex(c.flash(), new RegExp(`delivery ${secondDelivery} is scheduled for 2099-06-01T00:00:00\\.000Z: a retry keeps a scheduled send's time`));
  await c.post(`${destination}/retry`);
  t.regex(c.flash(), /^0 queued deliveries to later\.example are due now\.$/);
  const stillHeld = await t0.app.services.queue.messages({ destination: 'later.example' }, 10);
  t.deepEqual(stillHeld.messages.map((m) => m.state), ['suspended', 'suspended']);

  // Bounced: every queued delivery FAILED with the reason.
  await c.post(`${destination}/bounce`, { reason: 'domain is gone' });
  t.regex(c.flash(), /^2 queued deliveries to later\.example were bounced/);
  for (const id of [second, third]) {
    const email = (await t0.request('GET', `/v1/emails/${id}`)).body;
    t.is(email.latestStatus, 'FAILED');
  }
  t.regex((await c.get(destination)).text, /Nothing is queued for later\.example/);

  // Resumed: the suspension is gone.
  t.is((await c.post(`/console/operator/queue/suspensions/${suspension!.id}/resume`, {}, { referer: '/console/operator/queue' })).location, '/console/operator/queue');
  t.regex(c.flash(), /has ended/);
  t.deepEqual(await t0.app.services.queue.listSuspensions(), []);
  t.is((await c.post(`/console/operator/queue/suspensions/${suspension!.id}/resume`)).status, 303);
  t.regex(c.flash(), /not found \(or already ended\)/);

  // The audit log: every change, newest first, by this console user (the refused retry is none).
  const { entries } = await t0.app.services.audit.list(5);
  t.deepEqual(
    entries.map((e) => [e.action, e.target.deliveryId ?? e.target.destination]),
    [
      ['queue.resume', undefined],
      ['queue.bounce', 'later.example'],
      ['queue.retry', 'later.example'],
      ['queue.suspend', 'later.example'],
      ['queue.purge', Number(firstDelivery)],
    ],
  );
  t.true(entries.every((e) => e.actor === `console user ${me.id} (op@acts.dev)` && e.consoleUserId === me.id && e.keyId === null));
  t.like(entries[1]!.target, { reason: 'domain is gone', bounced: 2 });
  t.like(entries[3]!.target, { minutes: 30, reason: 'provider asked us to wait', suspensionId: suspension!.id });
  t.like(entries[4]!.target, { emailId: first, destination: 'later.example' });
});

test.serial('operator queue: a destination with more deliveries than a page is read page by page, with its cursor', async (t) => {
  for (const batch of [0, 1]) {
    const to = Array.from({ length: 30 }, (_, i) => `r${batch * 30 + i}@paged.example`);
    const res = await t0.request('POST', '/v1/emails', { body: { from: 'x@acts.dev', to, subject: 'Many', text: 'x', scheduledAt: '2099-06-01T00:00:00Z' } });
    t.is(res.status, 200);
  }
  const recipients = (html: string) => [...html.matchAll(/>(r\d+@paged\.example)</g)].map((m) => m[1]!);
  const first = await c.get('/console/operator/queue/destinations/paged.example');
  t.is(recipients(first.text).length, 50);
  t.false(first.text.includes('First page'));
  const next = /<a rel="next" href="([^"]+)">Next/.exec(first.text)![1]!.replace(/&amp;/g, '&');
  t.regex(next, /^\/console\/operator\/queue\/destinations\/paged\.example\?cursor=/);
  const second = await c.get(next);
  t.is(recipients(second.text).length, 10);
  t.true(second.text.includes('← First page'));
  t.false(second.text.includes('rel="next"'));
  t.is(new Set([...recipients(first.text), ...recipients(second.text)]).size, 60);
  t.is((await c.get('/console/operator/queue/destinations/paged.example?cursor=garbage')).status, 400);
});
