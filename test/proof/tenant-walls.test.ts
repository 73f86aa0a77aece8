import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';
import { ConsoleClient } from '../console/helpers/console-client.js';

// The tenant walls tried with the caller's own inputs (tenant-isolation.test.ts aims other
// teams' ids at every route): searches, filters and segments whose text is hostile or
// non-ASCII, over two teams holding the very same names and addresses. Every answer is
// checked as an exact result set, so a query that reaches past its team, or misses the
// caller's own rows, fails.

let t0: TestApp;
let keyB: string;
/** Team B's key bound to its first domain. */
let boundB: string;
const ids: Record<string, any> = {};

const NAMES = ['Été à Zürich', 'ÜBER deal', 'plain 100%_off', 'back\\slash'];
const ADDRESSES = ['ann@example.net', 'x_y%z@example.net', 'zoe.case@example.net'];

/** A team's copy of everything, under the same names as the other team's. */
async function fill(key: string, domain: string) {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'book' }, key })).body.id as string;
  const contacts: Record<string, string> = {};
  for (const email of ADDRESSES) {
    const res = await t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email, firstName: 'Éva', properties: { team_id: '1', id: 'x', plan: 'pro' } }, key });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    contacts[email] = res.body.contactId;
  }
  const templates: Record<string, string> = {};
  const campaigns: Record<string, string> = {};
  for (const name of NAMES) {
    templates[name] = (await t0.request('POST', '/v1/templates', { body: { name, subject: name }, key })).body.id;
    campaigns[name] = (await t0.request('POST', '/v1/campaigns', { body: { name, from: `x@${domain}`, subject: name, contactBookId: book, html: '<p>hi</p>' }, key })).body.id;
  }
  return { book, contacts, templates, campaigns };
}

test.before(async () => {
  t0 = await startTestApp();
  const { b } = await twoTeams(t0, { a: { domains: ['acme.dev'] }, b: { consoleUser: 'b@b.example', domains: ['bolt.dev', 'bolt-two.dev'] } });
  keyB = b.key;
  boundB = (await t0.app.services.apiKeys.create(b.teamId, { name: 'bound', permission: 'FULL', domainId: b.domains[0]!.id })).token;
  ids.a = await fill(t0.key, 'acme.dev');
  ids.b = await fill(keyB, 'bolt.dev');
});
test.after.always(async () => {
  await t0?.close();
});

test('searching templates and campaigns by their own non-ASCII names finds them, and only the caller\'s', async (t) => {
  const search = async (what: 'templates' | 'campaigns', q: string) => {
    const res = await t0.request('GET', `/v1/${what}?search=${encodeURIComponent(q)}&limit=100`, { key: keyB });
    t.is(res.status, 200, JSON.stringify(res.body));
    return (res.body[what] as { id: string }[]).map((x) => x.id).sort();
  };
  for (const what of ['templates', 'campaigns'] as const) {
    const mine = ids.b[what] as Record<string, string>;
    for (const name of NAMES) t.deepEqual(await search(what, name), [mine[name]], `${what}: "${name}"`);
    // Part of a name, in its own case or in another, non-ASCII letters included (unicode-case-folding.test.ts).
    t.deepEqual(await search(what, 'Zürich'), [mine['Été à Zürich']], `${what}: Zürich`);
    t.deepEqual(await search(what, 'Té à ZüRICH'), [mine['Été à Zürich']], `${what}: Té à ZüRICH`);
    t.deepEqual(await search(what, 'ÉTÉ À ZÜRICH'), [mine['Été à Zürich']], `${what}: ÉTÉ À ZÜRICH`);
    t.deepEqual(await search(what, 'Ü'), [mine['ÜBER deal'], mine['Été à Zürich']].sort(), `${what}: Ü`);
    // LIKE wildcards are text.
    t.deepEqual(await search(what, '%_'), [mine['plain 100%_off']], `${what}: %_`);
    t.deepEqual(await search(what, '\\'), [mine['back\\slash']], `${what}: backslash`);
    t.deepEqual(await search(what, '_'), [mine['plain 100%_off']], `${what}: _`);
  }
});

test('segments over the caller\'s own book: wildcards, in-lists, column-named properties and empty groups select exactly its own contacts', async (t) => {
  const b = ids.b.contacts as Record<string, string>;
  const members = async (filters: unknown) => {
    const seg = await t0.request('POST', '/v1/segments', { body: { name: 's', contactBookId: ids.b.book, filters }, key: keyB });
    t.is(seg.status, 200, JSON.stringify(seg.body));
    const res = await t0.request('GET', `/v1/segments/${seg.body.id}/contacts?limit=100`, { key: keyB });
    t.is(res.status, 200, JSON.stringify(res.body));
    return (res.body.contacts as { id: string }[]).map((c) => c.id).sort();
  };
  const all = Object.values(b).sort();
  const cases: [unknown, string[]][] = [
    [{ match: 'any', conditions: [{ field: 'email', op: 'contains', value: '%' }] }, [b['x_y%z@example.net']!]],
    [{ match: 'any', conditions: [{ field: 'email', op: 'startsWith', value: 'x_' }] }, [b['x_y%z@example.net']!]],
    [{ match: 'any', conditions: [{ field: 'email', op: 'contains', value: '_' }] }, [b['x_y%z@example.net']!]],
    [{ match: 'any', conditions: [{ field: 'email', op: 'eq', value: 'ZOE.Case@EXAMPLE.net' }] }, [b['zoe.case@example.net']!]],
    [{ match: 'any', conditions: [{ field: 'email', op: 'in', value: ['ann@example.net', 'nobody@example.net'] }] }, [b['ann@example.net']!]],
    [{ match: 'any', conditions: [{ field: 'properties.team_id', op: 'eq', value: '1' }, { field: 'properties.id', op: 'exists' }] }, all],
    [{ match: 'any', conditions: [{ field: 'firstName', op: 'eq', value: 'nobody' }, { field: 'email', op: 'contains', value: '@' }] }, all],
    [{ match: 'all', conditions: [{ match: 'any', conditions: [] }] }, []],
    [{ match: 'any', conditions: [{ match: 'all', conditions: [] }] }, all],
    [{ match: 'any', conditions: [{ match: 'all', conditions: [{ field: 'subscribed', op: 'neq', value: true }] }, { match: 'any', conditions: [{ field: 'lastName', op: 'neq', value: 'x' }] }] }, all],
  ];
  for (const [filters, expected] of cases) t.deepEqual(await members(filters), expected, JSON.stringify(filters));
});

test('a key bound to one domain: its idempotency keys, list filters and analytics stay on its domain', async (t) => {
  const send = (key: string, from: string, idem: string) =>
    t0.request('POST', '/v1/emails', { body: { from, to: 'r@example.net', subject: 'idem', text: 'x' }, key, headers: { 'idempotency-key': idem } });
  // The team's unbound key sends from the second domain with a key; the bound key replays it.
  const other = await send(keyB, 'x@bolt-two.dev', 'shared-key');
  t.is(other.status, 200);
  const replay = await send(boundB, 'x@bolt-two.dev', 'shared-key');
  t.is(replay.status, 403, JSON.stringify(replay.body));
  t.false(JSON.stringify(replay.body).includes(other.body.emailId));
  // The same key in team A is team A's own: it sends.
  const acme = await send(t0.key, 'x@acme.dev', 'shared-key');
  t.is(acme.status, 200);
  t.not(acme.body.emailId, other.body.emailId);
  const own = await send(boundB, 'x@bolt.dev', 'bound-key');
  t.is(own.status, 200);
  const domains = (await t0.request('GET', '/v1/domains', { key: keyB })).body as { id: number; name: string }[];
  const two = domains.find((d) => d.name === 'bolt-two.dev')!.id;
  const one = domains.find((d) => d.name === 'bolt.dev')!.id;
  const list = async (q: string) => ((await t0.request('GET', `/v1/emails?limit=100${q}`, { key: boundB })).body.data as { id: string }[]).map((e) => e.id);
  t.deepEqual(await list(''), [own.body.emailId]);
  t.deepEqual(await list(`&domainId=${two}`), []);
  t.deepEqual(await list(`&domainId=${two}&domainId=${one}`), [own.body.emailId]);
  const series = await t0.request('GET', `/v1/analytics/email-time-series?domainId=${two}`, { key: boundB });
  t.true(series.status === 403 || series.status === 404, JSON.stringify(series.body));
});

test('a key bound to one domain sees and manages only its own domain\'s campaigns, answering for another domain\'s as for its email', async (t) => {
  const book = ids.b.book as string;
  const campaign = async (key: string, from: string, extra: Record<string, unknown> = {}) => {
    const res = await t0.request('POST', '/v1/campaigns', { body: { name: `walls ${from}`, from, subject: 's', contactBookId: book, html: '<p>hi</p>', ...extra }, key });
    t.is(res.status, 200, JSON.stringify(res.body));
    return res.body.id as string;
  };
  // The team's unbound key makes campaigns from its second domain: a draft and a paused one.
  const otherDraft = await campaign(keyB, 'Walls <walls@bolt-two.dev>');
  const otherPaused = await campaign(keyB, 'walls@bolt-two.dev', { sendNow: true, batchSize: 1 });
  await t0.app.runCampaigns();
  t.is((await t0.request('POST', `/v1/campaigns/${otherPaused}/pause`, { key: keyB })).status, 200);
  const ownDraft = await campaign(boundB, 'walls@bolt.dev');
  // What the bound key gets for another domain's email: the answer every campaign route must give.
  const email = await t0.request('POST', '/v1/emails', { body: { from: 'x@bolt-two.dev', to: 'r@example.net', subject: 'walls', text: 'x' }, key: keyB });
  t.is(email.status, 200);
  const foreign = await t0.request('GET', `/v1/emails/${email.body.emailId}`, { key: boundB });
  t.is(foreign.status, 404, JSON.stringify(foreign.body));

  const list = async (key: string) => ((await t0.request('GET', '/v1/campaigns?limit=100&search=walls', { key })).body.campaigns as { id: string }[]).map((c) => c.id).sort();
  t.deepEqual(await list(boundB), [ownDraft]);
  t.deepEqual(await list(keyB), [otherDraft, otherPaused, ownDraft].sort());
  // The count is the key's share too, not the team's.
  const all = await t0.request('GET', '/v1/campaigns?limit=100', { key: boundB });
  t.is(all.body.total, all.body.campaigns.length);
  t.false((all.body.campaigns as { from: string }[]).some((c) => c.from.includes('bolt-two.dev')), 'no campaign from the other domain');

  const tries: [string, string, unknown?][] = [
    ['GET', `/v1/campaigns/${otherDraft}`],
    ['PATCH', `/v1/campaigns/${otherDraft}`, { name: 'taken over' }],
    ['POST', `/v1/campaigns/${otherDraft}/schedule`, { scheduledAt: new Date(Date.now() + 30 * 86_400_000).toISOString() }],
    ['POST', `/v1/campaigns/${otherPaused}/pause`],
    ['POST', `/v1/campaigns/${otherPaused}/resume`],
    ['DELETE', `/v1/campaigns/${otherDraft}`],
    ['DELETE', `/v1/campaigns/${otherPaused}`],
  ];
  for (const [method, path, body] of tries) {
    const res = await t0.request(method, path, { body, key: boundB });
    t.is(res.status, foreign.status, `${method} ${path}: ${JSON.stringify(res.body)}`);
    t.is(res.body?.error?.code, foreign.body.error.code, `${method} ${path}`);
  }
  // Nothing moved: the unbound key still finds both as they were.
  const seen = async (id: string) => (await t0.request('GET', `/v1/campaigns/${id}`, { key: keyB })).body;
  t.like(await seen(otherDraft), { status: 'DRAFT', name: 'walls Walls <walls@bolt-two.dev>' });
  t.like(await seen(otherPaused), { status: 'PAUSED' });

  // Its own domain's campaign: every route works.
  t.is((await t0.request('GET', `/v1/campaigns/${ownDraft}`, { key: boundB })).status, 200);
  t.is((await t0.request('PATCH', `/v1/campaigns/${ownDraft}`, { body: { name: 'walls own' }, key: boundB })).body.name, 'walls own');
  const moved = await t0.request('PATCH', `/v1/campaigns/${ownDraft}`, { body: { from: 'walls@bolt-two.dev' }, key: boundB });
  t.is(moved.status, 403, JSON.stringify(moved.body));
  const scheduled = await t0.request('POST', `/v1/campaigns/${ownDraft}/schedule`, { body: { scheduledAt: new Date(Date.now() + 30 * 86_400_000).toISOString() }, key: boundB });
  t.is(scheduled.body.campaign?.status, 'SCHEDULED', JSON.stringify(scheduled.body));
  t.is((await t0.request('DELETE', `/v1/campaigns/${ownDraft}`, { key: boundB })).status, 200);
  // The unbound key manages the other domain's: a draft moved onto the bound key's domain shows up there.
  t.is((await t0.request('PATCH', `/v1/campaigns/${otherDraft}`, { body: { from: 'walls@bolt.dev' }, key: keyB })).status, 200);
  t.deepEqual(await list(boundB), [otherDraft]);
  t.is((await t0.request('DELETE', `/v1/campaigns/${otherDraft}`, { key: keyB })).status, 200);
  t.is((await t0.request('DELETE', `/v1/campaigns/${otherPaused}`, { key: keyB })).status, 200);
});

test('console lists take hostile filters from the caller\'s own address bar without a 500 or another team\'s rows', async (t) => {
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn('b@b.example');
  // A filter that is no value of the caller's (another team's domain or book) is named on the
  // page (400) and left out; the rest are searched as typed.
  for (const [path, status] of [
    ['/console/emails?domainId=99999999999', 400],
    ['/console/received?domainId=99999999999', 400],
    ['/console/emails?tag=%25&since=2000-01-01', 200],
    ['/console/suppressions?q=%25_', 200],
    [`/console/contacts/${ids.b.book}?q=%25`, 200],
    [`/console/contacts/${ids.b.book}?q=${encodeURIComponent('\\')}`, 200],
    [`/console/templates?q=${encodeURIComponent('Été')}`, 200],
    [`/console/campaigns?q=${encodeURIComponent('Été')}`, 200],
    [`/console/segments?book=${ids.a.book}`, 200],
  ] as const) {
    const res = await c.get(path);
    t.is(res.status, status, path);
    if (status === 400) t.regex(res.text, /role="alert">[^<]*there is no domain with the id (&quot;|&#34;|")99999999999/, `${path}: names the filter`);
    t.false(res.text.includes(ids.a.book) || Object.values(ids.a.templates as Record<string, string>).some((id) => res.text.includes(id)), `${path}: team A's ids`);
  }
  for (const [path, form] of [
    ['/console/api-keys', { name: 'k', permission: 'FULL', domainId: '99999999999' }],
    ['/console/domains/99999999999/delete', {}],
    [`/console/templates/${ids.b.templates[NAMES[0]!]}/rollback`, { versionNumber: '99999999999' }],
  ] as const) {
    const res = await c.post(path, form as Record<string, string>);
    t.is(res.status, 303, `${path}: ${c.flash()}`);
  }
  const contacts = await c.get(`/console/contacts/${ids.b.book}?q=${encodeURIComponent('ZOE.c')}`);
  t.true(contacts.text.includes('zoe.case@example.net'));
  t.false(contacts.text.includes('ann@example.net'));
  // A non-ASCII first name, as typed, finds every contact of the book carrying it.
  const named = await c.get(`/console/contacts/${ids.b.book}?q=${encodeURIComponent('Éva')}`);
  for (const email of ADDRESSES) t.true(named.text.includes(email), email);
  // The export is the book's own rows, whatever another team's book holds under the same addresses.
  const csv = await c.get(`/console/contacts/${ids.b.book}/export.csv`);
  t.is(csv.status, 200);
  t.is(csv.text.trim().split(/\r?\n/).length, 1 + ADDRESSES.length);
  t.is((await c.get(`/console/contacts/${ids.a.book}/export.csv`)).status, 404);
});
