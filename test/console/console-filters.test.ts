import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { ConsoleClient, consoleUser } from './helpers/console-client.js';

// A list page's filters in the query string: a value that is no valid filter is named on the
// page (role="alert") with status 400, and only that filter is left out; never a 500, never a
// list quietly other than the one asked for.

let t0: TestApp;
let c: ConsoleClient;
const ids: Record<string, string> = {};

test.before(async () => {
  t0 = await startTestApp({ overrides: { webhooks: { allowPrivate: true } } });
  const domain = await addVerifiedDomain(t0, 'filters.dev');
  ids.domain = String(domain.id);
  await consoleUser(t0.app, 'op@filters.dev', t0.teamId, true);
  c = new ConsoleClient(t0.baseUrl);
  await c.signIn('op@filters.dev');
  for (const tag of ['red', 'blue']) {
    const sent = await t0.request('POST', '/v1/emails', { body: { from: 'x@filters.dev', to: 'someone@example.net', subject: `Subject ${tag}`, text: 't', tags: [tag] } });
    if (sent.status !== 200) throw new Error(JSON.stringify(sent.body));
  }
  const book = await t0.request('POST', '/v1/contactBooks', { body: { name: 'Book' } });
  ids.book = book.body.id;
  for (const email of ['ann@example.org', 'bob@example.org']) await t0.request('POST', `/v1/contactBooks/${ids.book}/contacts`, { body: { email } });
  ids.segment = (await t0.request('POST', '/v1/segments', { body: { name: 'Loyal readers', contactBookId: ids.book, filters: { match: 'all', conditions: [] } } })).body.id;
  await t0.request('POST', '/v1/campaigns', { body: { name: 'Spring sale', from: 'x@filters.dev', subject: 'S', contactBookId: ids.book, html: '<p>hi</p>' } });
  await t0.request('POST', '/v1/templates', { body: { name: 'Tpl one', subject: 'Hi' } });
  await t0.request('POST', '/v1/templates', { body: { name: 'Tpl two', subject: 'Hi' } });
  for (const email of ['one@example.org', 'two@example.org']) await t0.request('POST', '/v1/suppressions', { body: { email } });
  ids.webhook = (await t0.request('POST', '/v1/webhooks', { body: { url: 'http://127.0.0.1:9/hook', eventTypes: ['email.sent'] } })).body.id;
});
test.after.always(async () => {
  await t0?.close();
});

/** The page's alert, as text. */
const alertOf = (page: string) => /<div class="flash flash-error" role="alert">([^<]*)<\/div>/.exec(page)?.[1]?.replace(/&quot;/g, '"') ?? '';

test('a bad filter value is named on the page, with 400, and only that filter is left out', async (t) => {
  const cases: [path: string, named: RegExp, shown: string[], hidden: string[]][] = [
    ['/console/emails?tag=red&since=2024-13-45', /^Sent since: "2024-13-45" is not a date \(YYYY-MM-DD\); the list is not filtered by it\.$/, ['Subject red'], ['Subject blue']],
    ['/console/emails?until=yesterday', /^Sent until: "yesterday" is not a date/, ['Subject red', 'Subject blue'], []],
    ['/console/emails?since=2024-02-30', /^Sent since: "2024-02-30" is not a date/, ['Subject red'], []],
    ['/console/emails?domainId=abc', /^Domain: there is no domain with the id "abc"; the list is not filtered by it\.$/, ['Subject red', 'Subject blue'], []],
    ['/console/emails?domainId=999', /^Domain: there is no domain with the id "999"/, ['Subject red'], []],
    [`/console/emails?tag=${'x'.repeat(65)}`, /^Tag: at most 64 characters; the list is not filtered by it\.$/, ['Subject red', 'Subject blue'], []],
    ['/console/emails?tag=blue&page=abc', /^Page: "abc" is not a page number \(1 to 100000\); showing page 1\.$/, ['Subject blue'], ['Subject red']],
    ['/console/emails?page=0', /^Page: "0" is not a page number/, ['Subject red'], []],
    ['/console/emails?page=-2', /^Page: "-2" is not a page number/, ['Subject red'], []],
    ['/console/campaigns?status=bogus', /^Status: "bogus" is not one of draft, scheduled, running, paused, sent; the list is not filtered by it\.$/, ['Spring sale'], []],
    ['/console/campaigns?page=1.5', /^Page: "1\.5" is not a page number/, ['Spring sale'], []],
    ['/console/suppressions?q=one&reason=bogus', /^Reason: "bogus" is not one of hard_bounce, complaint, manual; the list is not filtered by it\.$/, ['one@example.org'], ['two@example.org']],
    ['/console/suppressions?page=x', /^Page: "x" is not a page number/, ['one@example.org', 'two@example.org'], []],
    ['/console/templates?q=one&page=x', /^Page: "x" is not a page number/, ['Tpl one'], ['Tpl two']],
    ['/console/received?domainId=nope', /^Domain: there is no domain with the id "nope"/, [], []],
    ['/console/received?page=1e3', /^Page: "1e3" is not a page number/, [], []],
    ['/console/segments?page=two', /^Page: "two" is not a page number/, ['Loyal readers'], []],
    ['/console/contacts/BOOK?q=ann&page=nan', /^Page: "nan" is not a page number/, ['ann@example.org'], ['bob@example.org']],
    ['/console/segments/SEGMENT?page=9999999', /^Page: "9999999" is not a page number/, ['ann@example.org', 'bob@example.org'], []],
  ];
  for (const [raw, named, shown, hidden] of cases) {
    const path = raw.replace('BOOK', ids.book!).replace('SEGMENT', ids.segment!);
    const page = await c.get(path);
    t.is(page.status, 400, path);
    t.regex(alertOf(page.text), named, path);
    for (const s of shown) t.true(page.text.includes(s), `${path} shows ${s}`);
    for (const s of hidden) t.false(page.text.includes(s), `${path} still filters: no ${s}`);
  }
});

test('good filter values answer 200 with no alert; a value is matched whatever its case', async (t) => {
  const today = new Date().toISOString().slice(0, 10);
  for (const path of [
    `/console/emails?domainId=${ids.domain}&tag=red&since=2000-01-01&until=${today}&page=1`,
    '/console/emails?domainId=&tag=&since=&until=&page=',
    '/console/campaigns?status=DRAFT',
    '/console/campaigns?status=draft',
    '/console/suppressions?reason=manual&q=',
    '/console/templates?page=2',
    '/console/received?domainId=',
    '/console/segments?page=1',
    `/console/contacts/${ids.book}?q=&page=1`,
    '/console/emails?status=whatever&utm_source=x', // not filters of this page: not looked at
  ]) {
    const page = await c.get(path);
    t.is(page.status, 200, path);
    t.is(alertOf(page.text), '', path);
  }
  t.true((await c.get('/console/campaigns?status=draft')).text.includes('Spring sale'));
  t.false((await c.get('/console/campaigns?status=sent')).text.includes('Spring sale'));
});

test('several bad filters are all named, and the pager does not carry them on', async (t) => {
  const page = await c.get('/console/emails?since=soon&until=later&page=many');
  t.is(page.status, 400);
  const alert = alertOf(page.text);
  for (const name of ['Sent since: "soon"', 'Sent until: "later"', 'Page: "many"']) t.true(alert.includes(name), alert);
  t.false(page.text.includes('value="soon"'), 'the form does not offer the bad value again');
});

test('a bad cursor on a page of attempts or queued deliveries is the console error page with 400, not a 500', async (t) => {
  for (const path of [`/console/webhooks/${ids.webhook}?cursor=bogus`, '/console/operator/queue/destinations/example.net?cursor=bogus']) {
    const page = await c.get(path);
    t.is(page.status, 400, path);
    t.regex(page.text, /<h1>Not possible<\/h1>/, path);
    t.regex(page.text, /cursor: not a cursor/, path);
  }
});

test('the NUL character in a page\'s path, query or form is the console\'s own page (404 or 400, saying why), not the API\'s JSON, and changes nothing', async (t) => {
  // Found by test/proof/fuzz-console: the HTTP server's NUL check answered console pages with the API's JSON error.
  for (const [path, status, why] of [
    [`/console/contacts/${ids.book}%00`, 404, /There is no console page at this address/],
    ['/console/emails?tag=a%00b', 400, /tag: must not contain the NUL character/],
    ['/console/contacts?%00=1', 400, /must not contain the NUL character/],
    ['/console/login?next=%00', 400, /next: must not contain the NUL character/],
  ] as const) {
    const page = await c.get(path);
    t.is(page.status, status, path);
    t.regex(page.headers.get('content-type') ?? '', /^text\/html/, path);
    t.regex(page.text, why, path);
  }
  const before = (await t0.request('GET', '/v1/contactBooks')).body;
  const token = await c.csrf();
  for (const form of [{ name: 'a\u0000b' }, { 'na\u0000me': 'x' }] as Record<string, string>[]) {
    const res = await c.post('/console/contacts', form, { token });
    t.is(res.status, 400, JSON.stringify(form));
    t.regex(res.headers.get('content-type') ?? '', /^text\/html/);
    t.regex(res.text, /must not contain the NUL character/);
  }
  const post = await c.post(`/console/contacts/${ids.book}%00/delete`, {}, { token });
  t.is(post.status, 404);
  t.regex(post.headers.get('content-type') ?? '', /^text\/html/);
  t.deepEqual((await t0.request('GET', '/v1/contactBooks')).body, before);
});

test('a numeric id in a console path that no row can have (out of range, not digits) is not found, never a 500, and changes nothing', async (t) => {
  // Found by test/proof/fuzz-console on PostgreSQL: a 63-digit key id reached the store as an integer out of range (500).
  // A session of its own: a refused form's flash would show on the other tests' pages.
  const own = new ConsoleClient(t0.baseUrl);
  await own.signIn('op@filters.dev');
  const keysBefore = (await t0.request('GET', '/v1/apiKeys')).body;
  const domainsBefore = (await t0.request('GET', '/v1/domains')).body;
  const teamsBefore = await t0.app.services.teams.list();
  const token = await own.csrf();
  const bad = ['1'.repeat(63), '2147483648', '99999999999', '0', `${ids.domain}abc`, '1e3', '-1'];
  for (const id of bad) {
    const page = await own.get(`/console/domains/${id}`);
    t.is(page.status, 404, `GET domain ${id}`);
    t.regex(page.headers.get('content-type') ?? '', /^text\/html/);
    t.regex(page.text, /domain not found/);
    for (const [path, what] of [
      [`/console/domains/${id}/verify`, 'domain not found'],
      [`/console/domains/${id}/settings`, 'domain not found'],
      [`/console/domains/${id}/delete`, 'domain not found'],
      [`/console/api-keys/${id}/revoke`, 'API key not found'],
      [`/console/operator/teams/${id}`, 'team not found'],
      ...(/^\d{1,15}$/.test(id) ? ([[`/console/operator/queue/deliveries/${id}/retry`, `delivery ${id} is not queued`], [`/console/operator/queue/deliveries/${id}/give-up`, `delivery ${id} is not queued`]] as const) : []),
    ] as const) {
      // A refused form goes back to the page it came from, saying why (as for an id that is merely unknown).
      const res = await own.post(path, { name: 'Renamed' }, { token, referer: `${t0.baseUrl}/console/domains` });
      t.is(res.status, 303, `POST ${path}`);
      const back = await own.get(res.headers.get('location')!);
      t.is(alertOf(back.text), what, `POST ${path}`);
    }
  }
  t.deepEqual((await t0.request('GET', '/v1/apiKeys')).body, keysBefore);
  t.deepEqual((await t0.request('GET', '/v1/domains')).body, domainsBefore);
  t.deepEqual(await t0.app.services.teams.list(), teamsBefore);
  t.is((await own.get(`/console/domains/${ids.domain}`)).status, 200, 'a valid id still works');
});

test('a number in a console form beyond what any row can hold (a key\'s domain, a template version, a team\'s rate limit) is refused or not found, never a 500', async (t) => {
  const own = new ConsoleClient(t0.baseUrl);
  await own.signIn('op@filters.dev');
  const token = await own.csrf();
  const tpl = (await t0.request('POST', '/v1/templates', { body: { name: 'Versioned', subject: 'Hi' } })).body.id as string;
  const keysBefore = (await t0.request('GET', '/v1/apiKeys')).body;
  const teamsBefore = await t0.app.services.teams.list();
  for (const n of ['1'.repeat(40), '2147483648', '99999999999']) {
    for (const [path, form] of [
      ['/console/api-keys', { name: 'Huge domain', permission: 'FULL', domainId: n }],
      [`/console/templates/${tpl}/rollback`, { versionNumber: n }],
      [`/console/operator/teams/${t0.teamId}`, { name: 'Same', rateLimit: n }],
    ] as const) {
      const res = await own.post(path, form, { token, referer: `${t0.baseUrl}/console` });
      t.true(res.status < 500, `${path} ${n}: ${res.status}`);
      t.regex(res.headers.get('content-type') ?? 'text/html', /^text\/html/, path);
      if (res.status === 303) {
        const back = await own.get(res.headers.get('location')!);
        t.regex(alertOf(back.text), /./, `${path} ${n}: refused with a reason`);
      }
    }
  }
  t.deepEqual((await t0.request('GET', '/v1/apiKeys')).body, keysBefore);
  t.deepEqual(await t0.app.services.teams.list(), teamsBefore);
});
