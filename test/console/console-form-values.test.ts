import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { ConsoleClient, consoleUser } from './helpers/console-client.js';

// Form values the console's own pages never send, or send back as they showed them: a value
// that is not one the form offers is refused (never read as the widest choice), and what a
// page shows for editing saves back as the same data.

let t0: TestApp;
let c: ConsoleClient;
let domainId: number;

test.before(async () => {
  t0 = await startTestApp();
  domainId = (await addVerifiedDomain(t0, 'values.dev')).id;
  await consoleUser(t0.app, 'dev@values.dev', t0.teamId);
  c = new ConsoleClient(t0.baseUrl);
  await c.signIn('dev@values.dev');
});
test.after.always(async () => {
  await t0?.close();
});

const keyCount = async () => (await t0.app.services.apiKeys.list(t0.teamId)).length;

test.serial('API keys: a permission or domain the form does not offer is refused, never made into an unrestricted FULL key', async (t) => {
  const before = await keyCount();
  for (const [form, message] of [
    [{ permission: 'sending' }, /^permission: /],
    [{ permission: 'ADMIN' }, /^permission: /],
    [{ permission: 'SENDING', domainId: 'abc' }, /^domainId: /],
    [{ permission: 'SENDING', domainId: '99999999999999999999' }, /^domainId: /],
    [{ permission: 'SENDING', domainId: ' 1' }, /^domainId: /],
  ] as const) {
    const res = await c.post('/console/api-keys', { name: 'crafted', domainId: '', ...form }, { referer: '/console/api-keys' });
    t.is(res.status, 303, JSON.stringify(form));
    t.regex(c.flash(), message, JSON.stringify(form));
  }
  t.is(await keyCount(), before);
  // what the form offers still works: no permission field at all is FULL, as the API's default
  t.is((await c.post('/console/api-keys', { name: 'bound', permission: 'SENDING', domainId: String(domainId) })).status, 200);
  t.is((await c.post('/console/api-keys', { name: 'plain' })).status, 200);
  const made = (await t0.app.services.apiKeys.list(t0.teamId)).filter((k) => k.name === 'bound' || k.name === 'plain');
  t.deepEqual(made.map((k) => [k.name, k.permission, k.domainId]).sort(), [['bound', 'SENDING', domainId], ['plain', 'FULL', null]]);
});

test.serial('contacts: a property holding line breaks or edge spaces is shown escaped and saves back unchanged when another field is edited', async (t) => {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Lines' } })).body;
  const properties = { address: '12 Main St\nSpringfield\r\nUSA', note: 'a=b\\nc', plain: 'x', padded: '  kept as set  ' };
  const created = await t0.request('POST', `/v1/contactBooks/${book.id}/contacts`, { body: { email: 'lines@example.com', properties } });
  t.is(created.status, 200, JSON.stringify(created.body));
  const contactId = created.body.id ?? created.body.contactId;
  const path = `/console/contacts/${book.id}/contacts/${contactId}`;
  const page = await c.get(path);
  const shown = /<textarea[^>]*name="properties"[^>]*>([^<]*)<\/textarea>/.exec(page.text)![1]!.replaceAll('&#39;', "'").replaceAll('&quot;', '"').replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&');
  t.is(shown.split('\n').length, 4, shown);
  const saved = await c.post(path, { firstName: 'Lin', lastName: '', subscribed: 'on', properties: shown }, { referer: path });
  t.is(saved.status, 303, c.flash());
  t.is(c.flash(), 'Contact saved.');
  const after = await t0.request('GET', `/v1/contactBooks/${book.id}/contacts/${contactId}`);
  t.deepEqual(after.body.properties, properties);
  t.is(after.body.firstName, 'Lin');
  // a line typed by hand with \n in it makes a line break, and \\ a backslash
  await c.post(path, { firstName: 'Lin', subscribed: 'on', properties: 'two=first\\nsecond\nslash=C:\\\\temp' }, { referer: path });
  t.deepEqual((await t0.request('GET', `/v1/contactBooks/${book.id}/contacts/${contactId}`)).body.properties, { two: 'first\nsecond', slash: 'C:\\temp' });
});

test.serial('templates: a version number that is not a number is refused, not read by its leading digits', async (t) => {
  const tpl = (await t0.request('POST', '/v1/templates', { body: { name: 'Versions', subject: 'Hi', content: JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'one' }] }] }) } })).body;
  const base = `/console/templates/${tpl.id}`;
  t.is((await c.post(`${base}/publish`)).status, 303);
  t.is((await c.post(`${base}/publish`)).status, 303);
  t.is((await t0.app.services.templates.get(t0.teamId, tpl.id)).publishedVersion, 2);
  const res = await c.post(`${base}/rollback`, { versionNumber: '1abc' }, { referer: base });
  t.is(res.status, 303);
  t.regex(c.flash(), /^versionNumber: /);
  t.is((await t0.app.services.templates.get(t0.teamId, tpl.id)).publishedVersion, 2);
  t.is((await c.post(`${base}/rollback`, { versionNumber: '1' })).status, 303);
  t.is((await t0.app.services.templates.get(t0.teamId, tpl.id)).publishedVersion, 1);
});

test.serial('segments: a filter the builder\'s rows cannot write back (a comma inside an "in" value, spaces around a value) is edited as JSON and saves back unchanged', async (t) => {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Cities' } })).body;
  for (const condition of [
    { field: 'properties.city', op: 'in', value: ['Washington, D.C.', 'Paris'] },
    { field: 'properties.code', op: 'eq', value: ' padded ' },
    { field: 'properties.tags', op: 'in', value: [' a', 'b'] },
  ]) {
    const filters = { match: 'all', conditions: [condition] };
    const created = await t0.request('POST', '/v1/segments', { body: { name: 'Exact', contactBookId: book.id, filters } });
    t.is(created.status, 200, JSON.stringify(created.body));
    const path = `/console/segments/${created.body.id}`;
    const page = await c.get(path);
    t.true(page.text.includes('name="filtersJson"'), `builder rows shown for ${JSON.stringify(condition)}`);
    t.false(page.text.includes('name="field"'));
    // saving what the page shows (its JSON) keeps the filter
    const shown = /<textarea[^>]*name="filtersJson"[^>]*>([^<]*)<\/textarea>/.exec(page.text)![1]!.replaceAll('&quot;', '"').replaceAll('&#39;', "'").replaceAll('&amp;', '&');
    t.is((await c.post(path, { name: 'Exact', contactBookId: book.id, mode: 'json', filtersJson: shown }, { referer: path })).status, 303, c.flash());
    t.deepEqual((await t0.request('GET', `/v1/segments/${created.body.id}`)).body.filters, filters);
  }
  // a plain filter is still shown as the builder's rows
  const plain = await t0.request('POST', '/v1/segments', { body: { name: 'Plain', contactBookId: book.id, filters: { match: 'all', conditions: [{ field: 'properties.city', op: 'in', value: ['Rome', 'Paris'] }] } } });
  t.true((await c.get(`/console/segments/${plain.body.id}`)).text.includes('name="field"'));
});

test.serial('domains: a TLS policy the form does not offer is refused, never read as opportunistic (an enforced domain stays enforced)', async (t) => {
  const path = `/console/domains/${domainId}/settings`;
  t.is((await c.post(path, { tlsPolicy: 'ENFORCED' })).status, 303);
  t.is((await t0.app.services.domains.get({ teamId: t0.teamId, domainId: null }, domainId)).tlsPolicy, 'ENFORCED');
  for (const tlsPolicy of ['REQUIRED', 'enforce', '']) {
    const res = await c.post(path, { tlsPolicy }, { referer: `/console/domains/${domainId}` });
    t.is(res.status, 303);
    t.regex(c.flash(), /^tlsPolicy: /, tlsPolicy);
    t.is((await t0.app.services.domains.get({ teamId: t0.teamId, domainId: null }, domainId)).tlsPolicy, 'ENFORCED');
  }
  t.is((await c.post(path, { tlsPolicy: 'opportunistic' })).status, 303);
  t.is((await t0.app.services.domains.get({ teamId: t0.teamId, domainId: null }, domainId)).tlsPolicy, 'OPPORTUNISTIC');
});

test.serial('campaigns: a draft\'s segment is always the one selected on its page (past the first 200 segments, or deleted), so saving the draft never widens it to the whole book', async (t) => {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Audience' } })).body;
  const filters = { match: 'all', conditions: [{ field: 'subscribed', op: 'eq', value: true }] };
  const oldest = (await t0.request('POST', '/v1/segments', { body: { name: 'Oldest', contactBookId: book.id, filters } })).body;
  for (let i = 0; i < 200; i++) t.is((await t0.request('POST', '/v1/segments', { body: { name: `Newer ${i}`, contactBookId: book.id, filters } })).status, 200);
  const doomed = (await t0.request('POST', '/v1/segments', { body: { name: 'Doomed', contactBookId: book.id, filters } })).body;
  const draft = async (segmentId: string) => {
    const res = await t0.request('POST', '/v1/campaigns', { body: { name: 'Narrow', from: 'news@values.dev', subject: 'Hi', contactBookId: book.id, segmentId, content: JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Hello' }] }] }) } });
    t.is(res.status, 200, JSON.stringify(res.body));
    return res.body.id as string;
  };
  const selected = (text: string) => /<select id="[^"]*" name="segmentId"[^>]*>(.*?)<\/select>/s.exec(text)![1]!.match(/<option value="([^"]*)" selected>/)?.[1];

  const far = await draft(oldest.id);
  const farPage = await c.get(`/console/campaigns/${far}`);
  t.is(selected(farPage.text), oldest.id);
  t.true(farPage.text.includes('>Oldest</option>'));

  const orphan = await draft(doomed.id);
  t.is((await t0.request('DELETE', `/v1/segments/${doomed.id}`)).status, 200);
  const path = `/console/campaigns/${orphan}`;
  const page = await c.get(path);
  t.is(selected(page.text), doomed.id);
  // saving what the page shows is refused, saying the segment is gone; the audience stays narrow
  const res = await c.post(path, { name: 'Narrow', from: 'news@values.dev', subject: 'Hi again', contactBookId: book.id, segmentId: doomed.id, format: 'markup', content: 'Hello' }, { referer: path });
  t.is(res.status, 303);
  t.regex(c.flash(), /^segmentId: /);
  const after = (await t0.request('GET', `/v1/campaigns/${orphan}`)).body;
  t.is(after.segmentId, doomed.id);
  t.is(after.subject, 'Hi');
});

test.serial('contacts: editing the name of a contact awaiting its double opt-in confirmation leaves it pending, not unsubscribed', async (t) => {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Opt-in' } })).body;
  t.is((await c.post(`/console/contacts/${book.id}/settings`, { name: 'Opt-in', doubleOptInEnabled: 'on', doubleOptInFrom: 'News <news@values.dev>' })).status, 303);
  t.is(c.flash(), 'Book saved.');
  const created = await t0.request('POST', `/v1/contactBooks/${book.id}/contacts`, { body: { email: 'pending@example.com' } });
  const contactId = created.body.id ?? created.body.contactId;
  const read = async () => (await t0.request('GET', `/v1/contactBooks/${book.id}/contacts/${contactId}`)).body;
  t.deepEqual([(await read()).subscribed, (await read()).unsubscribeReason], [false, null]);
  const path = `/console/contacts/${book.id}/contacts/${contactId}`;
  const page = await c.get(path);
  // the edit form as the page shows it: its hidden fields, the checkbox left as it is (unticked)
  const form = /<form method="post" action="[^"]*contacts\/[^"]*" class="stack">(.*?)<\/form>/s.exec(page.text)![1]!;
  const hidden = Object.fromEntries([...form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].filter(([, n]) => n !== '_csrf').map(([, n, v]) => [n!, v!]));
  t.is((await c.post(path, { ...hidden, firstName: 'Pat', lastName: '', properties: '' }, { referer: path })).status, 303);
  t.is(c.flash(), 'Contact saved.');
  const after = await read();
  t.deepEqual([after.firstName, after.subscribed, after.unsubscribeReason], ['Pat', false, null]);
  // unticking a subscribed contact still unsubscribes it
  const sub = (await t0.request('POST', `/v1/contactBooks/${book.id}/contacts`, { body: { email: 'sub@example.com', subscribed: true } })).body;
  const subId = sub.id ?? sub.contactId;
  await t0.request('PATCH', `/v1/contactBooks/${book.id}/contacts/${subId}`, { body: { subscribed: true } });
  const subPath = `/console/contacts/${book.id}/contacts/${subId}`;
  const subForm = /<form method="post" action="[^"]*contacts\/[^"]*" class="stack">(.*?)<\/form>/s.exec((await c.get(subPath)).text)![1]!;
  const subHidden = Object.fromEntries([...subForm.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].filter(([, n]) => n !== '_csrf').map(([, n, v]) => [n!, v!]));
  t.true(subForm.includes('checked'));
  await c.post(subPath, { ...subHidden, firstName: '', properties: '' }, { referer: subPath });
  const unsub = (await t0.request('GET', `/v1/contactBooks/${book.id}/contacts/${subId}`)).body;
  t.deepEqual([unsub.subscribed, unsub.unsubscribeReason], [false, 'UNSUBSCRIBED']);
});

test.serial('campaigns: a draft whose contact book was deleted shows that book, not another one, and saving it is refused rather than moving it to another book', async (t) => {
  const keep = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Kept' } })).body;
  const gone = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Gone' } })).body;
  const content = JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Hello' }] }] });
  const id = (await t0.request('POST', '/v1/campaigns', { body: { name: 'Orphan', from: 'news@values.dev', subject: 'Hi', contactBookId: gone.id, content } })).body.id as string;
  t.is((await t0.request('DELETE', `/v1/contactBooks/${gone.id}`)).status, 200);
  const path = `/console/campaigns/${id}`;
  const page = await c.get(path);
  t.is(page.status, 200);
  const books = /<select id="[^"]*" name="contactBookId"[^>]*>(.*?)<\/select>/s.exec(page.text)![1]!;
  t.is(books.match(/<option value="([^"]*)" selected>/)?.[1], gone.id);
  t.true(books.includes(`value="${keep.id}"`));
  const res = await c.post(path, { name: 'Orphan', from: 'news@values.dev', subject: 'Hi again', contactBookId: gone.id, segmentId: '', format: 'markup', content: 'Hello' }, { referer: path });
  t.is(res.status, 303);
  t.regex(c.flash(), /^contactBookId: /);
  const after = (await t0.request('GET', `/v1/campaigns/${id}`)).body;
  t.deepEqual([after.contactBookId, after.subject], [gone.id, 'Hi']);
});

test.serial('segments: a filter nested thousands of groups deep, posted as JSON, is refused with core\'s reason (a 400 back to the form), never a 500', async (t) => {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Deep' } })).body;
  const before = (await t0.request('GET', '/v1/segments?limit=100')).body.total;
  const deep = (n: number) => '{"match":"all","conditions":['.repeat(n) + ']}'.repeat(n);
  for (const [path, levels] of [['/console/segments', 20_000], ['/console/segments', 6], ['/console/segments/preview', 20_000]] as const) {
    const res = await c.post(path, { name: 'Deep', contactBookId: book.id, mode: 'json', filtersJson: deep(levels) }, { referer: `/console/segments/new?book=${book.id}` });
    t.true(res.status < 500, `${path} at ${levels} levels: ${res.status}`);
    t.regex(res.status === 303 ? c.flash() : res.text, /nest at most 5 levels deep/, `${path} at ${levels} levels`);
  }
  // A filter at the deepest level allowed that holds every contact still asks for the box.
  await c.post('/console/segments', { name: 'Deep', contactBookId: book.id, mode: 'json', filtersJson: deep(5) }, { referer: '/console/segments' });
  t.regex(c.flash(), /no condition narrows this segment/);
  t.is((await t0.request('GET', '/v1/segments?limit=100')).body.total, before);
});
