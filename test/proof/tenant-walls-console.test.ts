import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';
import { ConsoleClient } from '../console/helpers/console-client.js';

// The tenant walls tried through the console and list filters (tenant-walls-inputs.test.ts has
// the API's hostile inputs): the console's own query strings, its forms naming another team's
// book, segment or template, and list filters naming another team's rows or carrying LIKE
// wildcards. Two teams hold the same addresses; team A holds one more, so a count that reaches
// past the wall shows it; every answer is an exact set.

let t0: TestApp;
let keyB: string;
const ids: Record<string, any> = {};
const ADDRESSES = ['ann@example.net', 'x_y%z@example.net', 'zoe.case@example.net', "o'hara@example.net"];

async function fill(key: string) {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'book' }, key })).body.id as string;
  const contacts: Record<string, string> = {};
  for (const email of ADDRESSES) {
    const res = await t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email, properties: { plan: 'pro' } }, key });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    contacts[email] = res.body.contactId;
  }
  const seg = await t0.request('POST', '/v1/segments', { body: { name: 'seg', contactBookId: book, filters: { match: 'all', conditions: [] } }, key });
  for (const email of ADDRESSES) await t0.request('POST', '/v1/suppressions', { body: { email }, key });
  return { book, contacts, segment: seg.body.id as string };
}

test.before(async () => {
  t0 = await startTestApp();
  keyB = (await twoTeams(t0, { a: { domains: ['acme.dev'] }, b: { consoleUser: 'b@b.example', domains: ['bolt.dev'] } })).b.key;
  ids.a = await fill(t0.key);
  ids.b = await fill(keyB);
  // Team A alone holds one more contact and suppression: a count that reaches past B shows it.
  await t0.request('POST', `/v1/contactBooks/${ids.a.book}/contacts`, { body: { email: 'only-a@example.net' }, key: t0.key });
  await t0.request('POST', '/v1/suppressions', { body: { email: 'only-a@example.net' }, key: t0.key });
});
test.after.always(async () => {
  await t0?.close();
});

const errorStatus = (s: number) => s === 400 || s === 404 || s === 422;

test.serial('list filters that name another team\'s rows or carry wildcards find only the caller\'s own rows', async (t) => {
  const b = ids.b.contacts as Record<string, string>;
  const contacts = async (q: string) => {
    const res = await t0.request('GET', `/v1/contactBooks/${ids.b.book}/contacts?limit=100&${q}`, { key: keyB });
    t.is(res.status, 200, `${q}: ${JSON.stringify(res.body)}`);
    return (res.body as { id: string }[]).map((c) => c.id).sort();
  };
  t.deepEqual(await contacts(`emails=${encodeURIComponent('%')}`), []);
  t.deepEqual(await contacts(`emails=${encodeURIComponent('x_y%z@example.net')}`), [b['x_y%z@example.net']!]);
  t.deepEqual(await contacts(`emails=${encodeURIComponent('x_y_z@example.net')}`), []);
  t.deepEqual(await contacts(`emails=${encodeURIComponent("o'hara@example.net")}`), [b["o'hara@example.net"]!]);
  t.deepEqual(await contacts(`emails=only-a@example.net`), []);
  t.deepEqual(await contacts(`ids=${ids.a.contacts['ann@example.net']}&ids=${b['ann@example.net']}`), [b['ann@example.net']!]);
  t.deepEqual(await contacts(`ids=${encodeURIComponent("' or '1'='1")}`), []);
  // Segments of another team's book: none, and no count of them.
  const segs = await t0.request('GET', `/v1/segments?contactBookId=${ids.a.book}`, { key: keyB });
  t.true(segs.status === 200 || errorStatus(segs.status), JSON.stringify(segs.body));
  if (segs.status === 200) {
    t.deepEqual(segs.body.segments, []);
    t.is(segs.body.total, 0);
  }
  t.true(errorStatus((await t0.request('GET', `/v1/segments/${ids.a.segment}/contacts`, { key: keyB })).status));
});

test.serial('console query strings: out-of-range pages, another team\'s book in a filter, wildcards in searches', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn('b@b.example');
  const aIds = [ids.a.book, ids.a.segment, ...Object.values(ids.a.contacts as Record<string, string>)];
  for (const path of [
    '/console/suppressions?page=0',
    '/console/suppressions?page=-1',
    '/console/suppressions?page=99999999999999999999',
    `/console/contacts/${ids.b.book}?page=1e9`,
    '/console/emails?page=%00',
    `/console/segments?book=${ids.a.book}&page=2`,
    `/console/suppressions?q=only-a`,
    `/console/suppressions?q=${encodeURIComponent('ONLY-A')}`,
    `/console/contacts/${ids.b.book}?q=only-a`,
    `/console/contacts/${ids.b.book}?q=${encodeURIComponent('_')}`,
  ]) {
    const res = await c.get(path);
    t.true(res.status === 200 || res.status === 400, `${path}: ${res.status}`);
    t.false(res.text.includes('only-a@example.net'), `${path}: team A's address`);
    t.false(aIds.some((id) => res.text.includes(id)), `${path}: team A's ids`);
  }
  const underscore = await c.get(`/console/contacts/${ids.b.book}?q=${encodeURIComponent('_')}`);
  t.true(underscore.text.includes('x_y%z@example.net'));
  t.false(underscore.text.includes('ann@example.net'), 'an underscore is a character, not a wildcard');
  t.is((await c.get(`/console/contacts/${ids.a.book}?q=%25`)).status, 404);
  t.is((await c.get(`/console/segments/${ids.a.segment}`)).status, 404);
});

test.serial('console forms naming another team\'s book, segment or template create nothing and show none of it', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn('b@b.example');
  const templateA = (await t0.request('POST', '/v1/templates', { body: { name: 'acme secret template', subject: 'acme secret subject' }, key: t0.key })).body.id as string;
  const count = async (key: string, what: string) => (await t0.request('GET', `/v1/${what}?limit=100`, { key })).body.total as number;
  const before = { campaignsB: await count(keyB, 'campaigns'), segmentsA: await count(t0.key, 'segments'), segmentsB: await count(keyB, 'segments') };
  const filter = { match: 'any', field: 'email', op: 'contains', value: '@' };
  for (const [path, form] of [
    ['/console/campaigns', { name: 'walls console', from: 'x@bolt.dev', subject: 's', contactBookId: ids.a.book }],
    ['/console/campaigns', { name: 'walls console', from: 'x@bolt.dev', subject: 's', contactBookId: ids.b.book, segmentId: ids.a.segment }],
    ['/console/campaigns', { name: 'walls console', from: 'x@bolt.dev', contactBookId: ids.b.book, templateId: templateA }],
    ['/console/segments/preview', { contactBookId: ids.a.book, ...filter }],
    ['/console/segments', { name: 'walls console', contactBookId: ids.a.book, ...filter }],
    [`/console/segments/${ids.a.segment}`, { name: 'taken over', contactBookId: ids.b.book, ...filter }],
    [`/console/segments/${ids.a.segment}/delete`, {}],
  ] as const) {
    const res = await c.post(path, form as Record<string, string>);
    t.true([303, 400, 404].includes(res.status), `${path}: ${res.status}`);
    t.false(/acme secret|only-a@example\.net/.test(res.text + (c.flash() ?? '')), `${path}: shows team A's data`);
  }
  t.is(await count(keyB, 'campaigns'), before.campaignsB, 'no campaign made in B');
  t.is(await count(keyB, 'segments'), before.segmentsB, 'no segment made in B');
  t.is(await count(t0.key, 'segments'), before.segmentsA, "A's segments are all there");
  t.like((await t0.request('GET', `/v1/segments/${ids.a.segment}`, { key: t0.key })).body, { name: 'seg' });
});
