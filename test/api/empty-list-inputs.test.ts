import test, { type ExecutionContext } from 'ava';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.js';
import { until } from '../helpers/until.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { ConsoleClient, consoleUser } from '../console/helpers/console-client.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';

// Empty and degenerate lists that select rows (docs/api.md, Lists that select rows): a list
// given but naming nothing is a 400 naming the parameter, never "every row"; blanks between
// commas and duplicates are dropped; past a list's limit is a 400; a bad item is a 400 naming
// it. Big `in` lists stay within SQLite's and PostgreSQL's bound-parameter limits.

let t0: TestApp;
let receiver: WebhookReceiver;
let book: string;
let contacts: Record<string, string>;
test.before(async () => {
  t0 = await startTestApp({ overrides: { webhooks: { allowPrivate: true } } });
  receiver = await startWebhookReceiver();
  book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Empty lists' } })).body.id as string;
  contacts = {};
  for (const email of ['ann@example.net', 'bob@example.net', 'cy@example.net']) {
    const res = await t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email, properties: { plan: `plan-${email[0]}` } } });
    contacts[email] = res.body.contactId as string;
  }
});
test.after.always(async () => {
  await t0?.close();
  await receiver?.close();
});

function isBadRequest(t: ExecutionContext, res: TestResponse, field: RegExp, label: string): void {
  t.is(res.status, 400, `${label}: ${JSON.stringify(res.body)}`);
  t.is(res.body?.error?.code, 'BAD_REQUEST', label);
  t.regex(String(res.body?.error?.message), field, label);
}

const contactsPath = () => `/v1/contactBooks/${book}/contacts`;
const idsOf = (res: TestResponse) => (res.body as { id: string }[]).map((c) => c.id).sort();

test('contacts list: emails or ids given but naming nothing is a 400 naming the parameter, not the whole book', async (t) => {
  for (const [query, field] of [
    ['emails=', /^emails: /],
    ['emails=,,', /^emails: /],
    ['emails=%20,%20,', /^emails: /],
    ['emails=&emails=', /^emails: /],
    ['ids=', /^ids: /],
    ['ids=,', /^ids: /],
    [`ids=${contacts['ann@example.net']}&emails=`, /^emails: /],
  ] as const) {
    isBadRequest(t, await t0.request('GET', `${contactsPath()}?${query}`), field, query);
  }
});

test('contacts list: blanks between commas and duplicates are dropped; the filter still selects only what it names', async (t) => {
  const ann = contacts['ann@example.net']!;
  const bob = contacts['bob@example.net']!;
  const res = await t0.request('GET', `${contactsPath()}?emails=${encodeURIComponent('ann@example.net,, ANN@example.net ,ann@example.net,')}`);
  t.is(res.status, 200);
  t.deepEqual(idsOf(res), [ann]);
  const both = await t0.request('GET', `${contactsPath()}?ids=${ann},${ann},&ids=${bob}`);
  t.is(both.status, 200);
  t.deepEqual(idsOf(both), [ann, bob].sort());
});

test('contacts list: more than 1000 emails or ids is a 400 naming the parameter; 1000 is fine', async (t) => {
  const ids = (n: number) => Array.from({ length: n }, (_, i) => `c${i}`).join(',');
  isBadRequest(t, await t0.request('GET', `${contactsPath()}?ids=${ids(1001)}`), /^ids: at most 1000/, '1001 ids');
  const atLimit = await t0.request('GET', `${contactsPath()}?ids=${ids(999)},${contacts['cy@example.net']}`);
  t.is(atLimit.status, 200);
  t.deepEqual(idsOf(atLimit), [contacts['cy@example.net']!]);
  const emails = Array.from({ length: 1001 }, (_, i) => `${i}@e.x`).join(',');
  isBadRequest(t, await t0.request('GET', `${contactsPath()}?emails=${emails}`), /^emails: at most 1000/, '1001 emails');
  // Repeated past Node's 1000 query pairs, the rest would be dropped unread: a 400, never a quietly shorter list.
  const repeated = Array.from({ length: 1100 }, (_, i) => `ids=c${i}`).join('&');
  isBadRequest(t, await t0.request('GET', `${contactsPath()}?${repeated}&ids=${contacts['cy@example.net']}`), /^ids: at most 1000/, '1101 ids, repeated');
  // 1000 ordinary addresses pass Node's 16 KB for the request line and headers: refused before any route, not a crash.
  const long = Array.from({ length: 1000 }, (_, i) => `someone.${i}@example.net`).join(',');
  t.is((await t0.request('GET', `${contactsPath()}?emails=${long}`)).status, 431);
});

test('emails, received emails, TLS reports: a repeated filter given empty is a 400 naming it, not every row', async (t) => {
  for (const [path, query, field] of [
    ['/v1/emails', 'domainId=', /^domainId: /],
    ['/v1/emails', 'domainId=1&domainId=', /^domainId: /],
    ['/v1/emails', 'tag=', /^tag: /],
    ['/v1/emails', 'tag=a&tag=', /^tag: /],
    ['/v1/receivedEmails', 'domainId=', /^domainId: /],
    ['/v1/tlsReports', 'domainId=', /^domainId: /],
  ] as const) {
    isBadRequest(t, await t0.request('GET', `${path}?${query}`), field, `${path}?${query}`);
  }
});

test('single-valued filters given empty are a 400 naming them too (the same domainId= as the lists); search, page and cursor given empty are as left out', async (t) => {
  for (const [path, field] of [
    ['/v1/analytics/email-time-series?domainId=', /^domainId: /],
    ['/v1/analytics/reputation-metrics?domainId=', /^domainId: /],
    ['/v1/emails?startDate=', /^startDate: /],
    ['/v1/emails?endDate=', /^endDate: /],
    ['/v1/campaigns?status=', /^status: /],
    ['/v1/suppressions?reason=', /^reason: /],
    ['/v1/segments?contactBookId=', /^contactBookId: /],
  ] as const) {
    isBadRequest(t, await t0.request('GET', path), field, path);
  }
  for (const path of ['/v1/suppressions?search=', '/v1/templates?search=&page=', `/v1/segments?contactBookId=${book}&page=`, '/v1/analytics/email-time-series?days=']) {
    t.is((await t0.request('GET', path)).status, 200, path);
  }
  const op = (await t0.app.services.operatorKeys.create('lists')).token;
  for (const [path, field] of [
    ['/admin/v1/queue/messages?destination=', /^destination: /],
    ['/admin/v1/queue/messages?campaignId=', /^campaignId: /],
    ['/admin/v1/queue/messages?teamId=', /^teamId: /],
    ['/admin/v1/queue/messages?state=', /^state: /],
  ] as const) {
    isBadRequest(t, await t0.request('GET', path, { key: op }), field, path);
  }
  t.is((await t0.request('GET', '/admin/v1/queue/messages?cursor=', { key: op })).status, 200);
});

test('emails list: more than 100 domainId or tag values is a 400 naming the parameter', async (t) => {
  const repeated = (name: string, n: number) => Array.from({ length: n }, (_, i) => `${name}=${i + 1}`).join('&');
  isBadRequest(t, await t0.request('GET', `/v1/emails?${repeated('domainId', 101)}`), /^domainId: at most 100/, '101 domainId');
  isBadRequest(t, await t0.request('GET', `/v1/emails?${repeated('tag', 101)}`), /^tag: at most 100/, '101 tag');
  // Past Node's 1000 query pairs the rest would be dropped unread: still a 400, never a quietly shorter list.
  isBadRequest(t, await t0.request('GET', `/v1/emails?${repeated('domainId', 1200)}`), /^domainId: at most 100/, '1200 domainId');
  t.is((await t0.request('GET', `/v1/emails?${repeated('domainId', 100)}`)).status, 200);
});

test('bulk bodies: an empty list is a 400 and changes nothing', async (t) => {
  const before = idsOf(await t0.request('GET', contactsPath()));
  isBadRequest(t, await t0.request('POST', `${contactsPath()}/bulk`, { body: [] }), /^body: /, 'contacts bulk add []');
  isBadRequest(t, await t0.request('DELETE', `${contactsPath()}/bulk`, { body: { contactIds: [] } }), /^contactIds: /, 'contacts bulk delete []');
  isBadRequest(t, await t0.request('DELETE', `${contactsPath()}/bulk`, { body: { contactIds: [''] } }), /^contactIds\[0\]: /, 'contacts bulk delete [""]');
  isBadRequest(t, await t0.request('DELETE', `${contactsPath()}/bulk`, { body: {} }), /^contactIds: /, 'contacts bulk delete {}');
  t.deepEqual(idsOf(await t0.request('GET', contactsPath())), before);
  // A bulk delete naming one contact twice deletes it once and counts it once.
  const spare = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Spare' } })).body.id as string;
  const gone = (await t0.request('POST', `/v1/contactBooks/${spare}/contacts`, { body: { email: 'gone@example.net' } })).body.contactId as string;
  const kept = (await t0.request('POST', `/v1/contactBooks/${spare}/contacts`, { body: { email: 'kept@example.net' } })).body.contactId as string;
  const twice = await t0.request('DELETE', `/v1/contactBooks/${spare}/contacts/bulk`, { body: { contactIds: [gone, gone, 'ct_nobody'] } });
  t.deepEqual(twice.body, { success: true, count: 1 });
  t.deepEqual(idsOf(await t0.request('GET', `/v1/contactBooks/${spare}/contacts`)), [kept]);
  isBadRequest(t, await t0.request('DELETE', `/v1/contactBooks/${spare}/contacts/bulk`, { body: { contactIds: Array.from({ length: 1001 }, (_, i) => `ct_${i}`) } }), /^contactIds: at most 1000/, '1001 contact ids');
  isBadRequest(t, await t0.request('POST', '/v1/suppressions/bulk', { body: { emails: [] } }), /^emails: /, 'suppressions bulk []');
  isBadRequest(t, await t0.request('POST', '/v1/suppressions/bulk/remove', { body: { emails: [] } }), /^emails: /, 'suppressions bulk remove []');
  isBadRequest(t, await t0.request('POST', '/v1/emails/batch', { body: [] }), /^body: /, 'emails batch []');
});

test('suppressions bulk: a blank or malformed item is a 400 naming it and lists nothing; duplicates count once', async (t) => {
  isBadRequest(t, await t0.request('POST', '/v1/suppressions/bulk', { body: { emails: ['', ' '] } }), /^emails\[0\]: /, 'blank items');
  isBadRequest(t, await t0.request('POST', '/v1/suppressions/bulk', { body: { emails: ['first-good@example.net', ' ', 'x@example.net'] } }), /^emails\[1\]: /, 'a blank among good ones');
  isBadRequest(t, await t0.request('POST', '/v1/suppressions/bulk', { body: { emails: ['first-good@example.net', 'not-an-address'] } }), /^emails\[1\]: /, 'a malformed one');
  t.is((await t0.request('GET', '/v1/suppressions/first-good@example.net')).status, 404, 'nothing listed by a refused request');
  isBadRequest(t, await t0.request('POST', '/v1/suppressions/bulk/remove', { body: { emails: ['first-good@example.net', ''] } }), /^emails\[1\]: /, 'remove with a blank');
  const dup = await t0.request('POST', '/v1/suppressions/bulk', { body: { emails: ['dup@example.net', 'DUP@example.net', ' dup@example.net '] } });
  t.is(dup.status, 200);
  t.deepEqual(dup.body, { success: true, count: 1, alreadySuppressed: 0 });
  const over = Array.from({ length: 1001 }, (_, i) => `o${i}@example.net`);
  isBadRequest(t, await t0.request('POST', '/v1/suppressions/bulk', { body: { emails: over } }), /^emails: at most 1000/, '1001 addresses');
});

test('segments: an empty in list is a 400 naming it (it could only match nothing); there is no notIn', async (t) => {
  const seg = (conditions: unknown[]) => t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: book, filters: { match: 'all', conditions } } });
  isBadRequest(t, await seg([{ field: 'email', op: 'in', value: [] }]), /^filters\.conditions\[0\]\.value: /, 'in []');
  isBadRequest(t, await seg([{ field: 'email', op: 'in', value: 'ann@example.net' }]), /^filters\.conditions\[0\]\.value: /, 'in a string');
  isBadRequest(t, await seg([{ field: 'email', op: 'notIn', value: [] }]), /^filters\.conditions\[0\]\.op: /, 'notIn');
  isBadRequest(t, await seg([{ field: 'email', op: 'in', value: ['ann@example.net', 7] }]), /^filters\.conditions\[0\]\.value\[1\]: /, 'a number in an email in list');
  // Every contact has an address: email neq a blank one would be the whole book, as contains '' would.
  isBadRequest(t, await seg([{ field: 'email', op: 'neq', value: '' }]), /^filters\.conditions\[0\]\.value: /, 'email neq ""');
  isBadRequest(t, await seg([{ field: 'email', op: 'neq', value: '  ' }]), /^filters\.conditions\[0\]\.value: /, 'email neq "  "');
  // Repeats count once, and an item that is no one's address finds no one, as in the contacts list's emails filter.
  const mixed = await seg([{ field: 'email', op: 'in', value: ['ANN@example.net', 'ann@example.net', 'not an address', ''] }]);
  t.is(mixed.status, 200, JSON.stringify(mixed.body));
  t.deepEqual(mixed.body.filters.conditions[0].value, ['ann@example.net', 'not an address', '']);
  const members = await t0.request('GET', `/v1/segments/${mixed.body.id}/contacts`);
  t.deepEqual(
    members.body.contacts.map((c: { id: string }) => c.id),
    [contacts['ann@example.net']],
  );
});

test('segments: 10 in lists of 1000 values (the limits) run on the store, email and property alike; one more value is a 400', async (t) => {
  const filler = (list: number, n: number) => Array.from({ length: n }, (_, i) => `nobody-${list}-${i}@example.net`);
  const lists = (field: string, hit: string) =>
    Array.from({ length: 10 }, (_, list) => ({ field, op: 'in', value: list === 9 ? [...filler(list, 999), hit] : filler(list, 1000) }));
  for (const [field, hit, expected] of [
    ['email', 'BOB@example.net', 'bob@example.net'],
    ['properties.plan', 'plan-c', 'cy@example.net'],
  ] as const) {
    const made = await t0.request('POST', '/v1/segments', { body: { name: `big ${field}`, contactBookId: book, filters: { match: 'any', conditions: lists(field, hit) } } });
    t.is(made.status, 200, JSON.stringify(made.body).slice(0, 300));
    const members = await t0.request('GET', `/v1/segments/${made.body.id}/contacts`);
    t.is(members.status, 200, field);
    t.deepEqual(
      members.body.contacts.map((c: { id: string }) => c.id),
      [contacts[expected]],
      field,
    );
    t.is(members.body.total, 1, field);
  }
  const tooMany = [...lists('email', 'x@example.net'), { field: 'email', op: 'in', value: ['one-more@example.net'] }];
  isBadRequest(
    t,
    await t0.request('POST', '/v1/segments', { body: { name: 'too big', contactBookId: book, filters: { match: 'any', conditions: tooMany } } }),
    /^filters\.conditions\[10\]\.value: a filter holds at most 10000/,
    '10001 values',
  );
  isBadRequest(
    t,
    await t0.request('POST', '/v1/segments', { body: { name: 'too long', contactBookId: book, filters: { match: 'all', conditions: [{ field: 'email', op: 'in', value: filler(0, 1001) }] } } }),
    /^filters\.conditions\[0\]\.value: in takes at most 1000/,
    '1001 in one list',
  );
});

test('webhooks: empty eventTypes and domainIds are a subscription to every event, as the spec says; a blank or unknown type is a 400 naming it', async (t) => {
  const made = await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: [], domainIds: [] } });
  t.is(made.status, 200, JSON.stringify(made.body));
  t.deepEqual(made.body.eventTypes, []);
  t.deepEqual(made.body.domainIds, []);
  const own = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Hooked' } })).body.id as string;
  await t0.request('POST', `/v1/contactBooks/${own}/contacts`, { body: { email: 'hooked@example.net' } });
  await until(() => receiver.calls.some((c) => c.json?.type === 'contact.created' && c.json?.data?.email === 'hooked@example.net'));
  t.pass();
  isBadRequest(t, await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: [''] } }), /^eventTypes\[0\]: /, 'a blank event type');
  isBadRequest(t, await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['email.sent', 'email.nope'] } }), /^eventTypes\[1\]: /, 'an unknown event type');
  isBadRequest(t, await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: [], domainIds: [0] } }), /^domainIds\[0\]: /, 'a domain id 0');
});

test('console segment builder: a condition with a value but no field, or an in list of only commas, is refused by name; nothing is saved', async (t) => {
  await consoleUser(t0.app, 'lists@example.net', t0.teamId);
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn('lists@example.net');
  const count = async () =>
    ((await t0.request('GET', `/v1/segments?contactBookId=${book}&limit=100`)).body.segments as { name: string }[]).filter((x) => x.name === 'from the builder').length;
  const before = await count();
  const referer = '/console/segments';
  for (const [row, message] of [
    [{ field: '', prop: '', op: 'eq', value: 'ann@example.net' }, /^filters\.conditions\[0\]\.field: /],
    [{ field: '', prop: 'plan', op: 'eq', value: '' }, /^filters\.conditions\[0\]\.field: /],
    [{ field: 'email', prop: '', op: 'in', value: ' , ,' }, /^filters\.conditions\[0\]\.value: /],
  ] as const) {
    const res = await c.post('/console/segments', { name: 'from the builder', contactBookId: book, match: 'all', field: [row.field, ''], prop: [row.prop, ''], op: [row.op, 'eq'], value: [row.value, ''] }, { referer });
    t.is(res.status, 303, JSON.stringify(row));
    t.is(res.location, referer);
    t.regex(c.flash(), message, JSON.stringify(row));
  }
  t.is(await count(), before);
  // A blank row (the builder's spare one) is no condition; a filled one is.
  const ok = await c.post('/console/segments', { name: 'from the builder', contactBookId: book, match: 'all', field: ['email', ''], prop: ['', ''], op: ['in', 'eq'], value: ['ann@example.net, bob@example.net,', ''] });
  t.is(ok.status, 303);
  t.is(await count(), before + 1);
});

test('console segment builder: a filter that holds the whole book is saved only when the form says so', async (t) => {
  await consoleUser(t0.app, 'whole-book@example.net', t0.teamId);
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn('whole-book@example.net');
  const named = async (name: string) =>
    ((await t0.request('GET', `/v1/segments?contactBookId=${book}&limit=100`)).body.segments as { id: string; name: string; filters: unknown }[]).filter((x) => x.name === name);
  const referer = '/console/segments';
  const blank = { field: [''], prop: [''], op: ['eq'], value: [''] };
  const refused = /^filters: no condition narrows this segment, so it holds every contact of the book/;
  // Removing the last row, or a JSON filter whose only branch is empty, would be the whole book.
  for (const [label, form] of [
    ['builder, all of no rows', { match: 'all', ...blank }],
    ['json, all of none', { mode: 'json', filtersJson: '{"match":"all","conditions":[]}' }],
    ['json, any of (all of none)', { mode: 'json', filtersJson: '{"match":"any","conditions":[{"field":"email","op":"eq","value":"x@example.net"},{"match":"all","conditions":[]}]}' }],
    // A group without "match" is "all" to core.
    ['json, none without match', { mode: 'json', filtersJson: '{"conditions":[]}' }],
    ['json, any of (none without match)', { mode: 'json', filtersJson: '{"match":"any","conditions":[{"field":"email","op":"eq","value":"x@example.net"},{"conditions":[]}]}' }],
  ] as const) {
    const res = await c.post('/console/segments', { name: 'whole book', contactBookId: book, ...form }, { referer });
    t.is(res.status, 303, label);
    t.is(res.location, referer, label);
    t.regex(c.flash(), refused, label);
  }
  t.deepEqual(await named('whole book'), []);
  // "any" of none holds no one, and all of (any of none) too: nothing to confirm.
  for (const filtersJson of ['{"match":"any","conditions":[]}', '{"match":"all","conditions":[{"match":"any","conditions":[]}]}']) {
    const res = await c.post('/console/segments', { name: 'no one', contactBookId: book, mode: 'json', filtersJson });
    t.is(res.status, 303, filtersJson);
    t.regex(String(res.location), /^\/console\/segments\/sg_/, filtersJson);
  }
  // Ticked, it is saved, and its page shows the box ticked and every contact.
  const saved = await c.post('/console/segments', { name: 'whole book', contactBookId: book, match: 'all', everyone: 'on', ...blank });
  t.regex(String(saved.location), /^\/console\/segments\/sg_/);
  const [segment] = await named('whole book');
  t.deepEqual(segment?.filters, { match: 'all', conditions: [] });
  const page = await c.get(String(saved.location));
  t.regex(page.text, /<input id="[^"]*" type="checkbox" name="everyone" value="on" checked>/);
  for (const email of Object.keys(contacts)) t.true(page.text.includes(email), email);
  // Saving it again without the tick is refused and leaves it as it was; with a condition, the tick does not matter.
  const untick = await c.post(String(saved.location), { name: 'whole book', contactBookId: book, segmentId: segment!.id, match: 'all', ...blank }, { referer: String(saved.location) });
  t.regex(c.flash(), refused);
  t.is(untick.location, String(saved.location));
  t.deepEqual((await named('whole book'))[0]?.filters, { match: 'all', conditions: [] });
  const narrowed = await c.post(String(saved.location), { name: 'whole book', contactBookId: book, segmentId: segment!.id, match: 'all', everyone: 'on', field: ['email', ''], prop: ['', ''], op: ['eq', 'eq'], value: ['ann@example.net', ''] });
  t.is(narrowed.status, 303);
  t.deepEqual((await named('whole book'))[0]?.filters, { match: 'all', conditions: [{ field: 'email', op: 'eq', value: 'ann@example.net' }] });
  const after = await c.get(String(saved.location));
  t.regex(after.text, /<input id="[^"]*" type="checkbox" name="everyone" value="on">/);
});

test('below the API: an empty list handed to a service or repository matches nothing, never every row', async (t) => {
  const domain = await addVerifiedDomain(t0, 'empty-lists.dev');
  const sent = await t0.request('POST', '/v1/emails', { body: { from: 'a@empty-lists.dev', to: 'b@example.com', subject: 's', text: 't', tags: ['x'], scheduledAt: 'in 2 days' } });
  t.is(sent.status, 200, JSON.stringify(sent.body));
  const ctx = { teamId: t0.teamId, domainId: null, apiKeyId: null };
  const { emails, contacts: contactService } = t0.app.services;
  const page = { offset: 0, limit: 50 };
  t.true((await emails.list(ctx, { ...page })).count >= 1, 'no filter: the email is listed');
  t.is((await emails.list(ctx, { ...page, domainIds: [domain.id] })).count, 1);
  t.is((await emails.list(ctx, { ...page, domainIds: [] })).count, 0);
  t.is((await emails.list(ctx, { ...page, tags: [] })).count, 0);
  const scope = { teamId: t0.teamId, domainId: null };
  await t.throwsAsync(() => contactService.list(scope, book, { ...page, emails: [] }), { message: /^emails: / });
  await t.throwsAsync(() => contactService.list(scope, book, { ...page, ids: [] }), { message: /^ids: / });
});
