import { repositoriesOf } from '../helpers/repositories.js';
import test from 'ava';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { twoTeams } from '../helpers/two-teams.js';

// The suppression endpoints, and the send path honouring the list (including a removed hard
// bounce being attempted again).

let w: MailWorld;
test.before(async () => {
  w = await startMailWorld();
});
test.after.always(async () => {
  await w?.close();
});

const req = (method: string, path: string, body?: unknown, key?: string) => w.t0.request(method, path, { body, key });

async function waitForStatus(id: string, status: string) {
  for (let i = 0; i < 50; i++) {
    await w.settle();
    const res = await req('GET', `/v1/emails/${id}`);
    if (res.body.latestStatus === status) return res.body;
  }
  throw new Error(`email ${id} never reached ${status}`);
}

test.serial('add (normalised, MANUAL by default), get by email, delete, 404 when absent', async (t) => {
  const res = await req('POST', '/v1/suppressions', { email: '  Someone@Example.COM ', source: 'support ticket 42' });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), ['createdAt', 'email', 'reason', 'source']);
  t.like(res.body, { email: 'someone@example.com', reason: 'MANUAL', source: 'support ticket 42' });
  const got = await req('GET', '/v1/suppressions/SOMEONE@example.com');
  t.is(got.status, 200);
  t.deepEqual(got.body, res.body);
  // Adding it again keeps the first entry.
  const again = await req('POST', '/v1/suppressions', { email: 'someone@example.com', reason: 'COMPLAINT' });
  t.deepEqual(again.body, res.body);
  const del = await req('DELETE', '/v1/suppressions/someone@example.com');
  t.is(del.status, 200);
  t.deepEqual(del.body, { email: 'someone@example.com', success: true });
  const gone = await req('GET', '/v1/suppressions/someone@example.com');
  t.is(gone.status, 404);
  t.is(gone.body.error.code, 'NOT_FOUND');
  t.is((await req('DELETE', '/v1/suppressions/someone@example.com')).status, 404);
  // Plus addressing survives the path.
  await req('POST', '/v1/suppressions', { email: 'a+tag@example.com' });
  t.is((await req('GET', `/v1/suppressions/${encodeURIComponent('a+tag@example.com')}`)).status, 200);
  t.is((await req('GET', '/v1/suppressions/a+tag@example.com')).status, 200);
});

test.serial('bad input is 400 naming the field', async (t) => {
  const cases: [string, string, unknown, RegExp][] = [
    ['POST', '/v1/suppressions', {}, /^email: /],
    ['POST', '/v1/suppressions', { email: 'nope' }, /^email: .*not a valid/],
    ['POST', '/v1/suppressions', { email: 'x@example.com', reason: 'SPAM' }, /^reason: /],
    ['POST', '/v1/suppressions', { email: 'x@example.com', source: 5 }, /^source: /],
    ['POST', '/v1/suppressions', { email: 'x@example.com', extra: 1 }, /extra/],
    ['GET', '/v1/suppressions/not-an-email', undefined, /^email: /],
    ['DELETE', '/v1/suppressions/not-an-email', undefined, /^email: /],
    ['GET', '/v1/suppressions?reason=SPAM', undefined, /^reason: /],
    ['GET', '/v1/suppressions?limit=101', undefined, /^limit: /],
    ['GET', '/v1/suppressions?page=0', undefined, /^page: /],
    ['POST', '/v1/suppressions/bulk', {}, /^emails: /],
    ['POST', '/v1/suppressions/bulk', { emails: [] }, /^emails: /],
    ['POST', '/v1/suppressions/bulk', { emails: ['ok@example.com', 'bad'] }, /^emails\[1\]: /],
    ['POST', '/v1/suppressions/bulk', { emails: Array.from({ length: 1001 }, (_, i) => `b${i}@example.com`) }, /^emails: at most 1000/],
    ['POST', '/v1/suppressions/bulk/remove', { emails: 'x@example.com' }, /^emails: /],
  ];
  for (const [method, path, body, message] of cases) {
    const res = await req(method, path, body);
    t.is(res.status, 400, `${method} ${path} ${JSON.stringify(body)?.slice(0, 60)}`);
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, message, `${method} ${path}`);
  }
  t.is((await req('GET', '/v1/suppressions/ok@example.com')).status, 404, 'the refused bulk added nothing');
});

test.serial('list: page/limit envelope, search, reason filter, newest first', async (t) => {
  const now = new Date().toISOString();
  await repositoriesOf(w.t0.app).suppressions.add(w.t0.teamId, 'bounced@list.dev', 'HARD_BOUNCE', 'em_x', now);
  await repositoriesOf(w.t0.app).suppressions.add(w.t0.teamId, 'angry@list.dev', 'COMPLAINT', 'em_y', now);
  await req('POST', '/v1/suppressions', { email: 'manual_1@list.dev' });
  await req('POST', '/v1/suppressions', { email: 'manualx1@list.dev' });
  const all = await req('GET', '/v1/suppressions?search=LIST.dev&limit=2');
  t.is(all.status, 200);
  t.deepEqual(Object.keys(all.body).sort(), ['hasMore', 'limit', 'page', 'suppressions', 'total', 'totalPage']);
  t.like(all.body, { page: 1, limit: 2, total: 4, totalPage: 2, hasMore: true });
  t.deepEqual(all.body.suppressions.map((s: any) => s.email), ['manualx1@list.dev', 'manual_1@list.dev']);
  const page2 = await req('GET', '/v1/suppressions?search=list.dev&limit=2&page=2');
  t.deepEqual(page2.body.suppressions.map((s: any) => s.email), ['angry@list.dev', 'bounced@list.dev']);
  t.false(page2.body.hasMore);
  const bounces = await req('GET', '/v1/suppressions?reason=HARD_BOUNCE&search=list.dev');
  t.deepEqual(bounces.body.suppressions, [{ email: 'bounced@list.dev', reason: 'HARD_BOUNCE', source: 'em_x', createdAt: now }]);
  // "_" in a search is that character, not a wildcard.
  const literal = await req('GET', '/v1/suppressions?search=manual_');
  t.deepEqual(literal.body.suppressions.map((s: any) => s.email), ['manual_1@list.dev']);
});

test.serial('bulk add accepts duplicates and listed addresses; bulk remove', async (t) => {
  await req('POST', '/v1/suppressions', { email: 'already@bulk.dev', reason: 'MANUAL' });
  const res = await req('POST', '/v1/suppressions/bulk', {
    emails: ['One@Bulk.dev', 'one@bulk.dev', 'two@bulk.dev', 'already@bulk.dev'],
    reason: 'COMPLAINT',
    source: 'import',
  });
  t.is(res.status, 200);
  t.deepEqual(res.body, { success: true, count: 2, alreadySuppressed: 1 });
  t.like((await req('GET', '/v1/suppressions/one@bulk.dev')).body, { reason: 'COMPLAINT', source: 'import' });
  t.is((await req('GET', '/v1/suppressions/already@bulk.dev')).body.reason, 'MANUAL');
  const removed = await req('POST', '/v1/suppressions/bulk/remove', { emails: ['ONE@bulk.dev', 'two@bulk.dev', 'never@bulk.dev'] });
  t.deepEqual(removed.body, { success: true, count: 2 });
  t.is((await req('GET', '/v1/suppressions/two@bulk.dev')).status, 404);
  const thousand = Array.from({ length: 1000 }, (_, i) => `k${i}@bulk.dev`);
  const big = await req('POST', '/v1/suppressions/bulk', { emails: thousand });
  t.is(big.body.count, 1000);
  t.is((await req('POST', '/v1/suppressions/bulk/remove', { emails: thousand })).body.count, 1000);
});

test.serial('sends honour the list; removing a hard bounce lets the address be attempted again', async (t) => {
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'ghost@example.net' ? { code: 550, message: '5.1.1 <ghost@example.net>: user unknown' } : undefined) });
  try {
    const first = await req('POST', '/v1/emails', sendBody(w, { to: 'ghost@example.net' }));
    await waitForStatus(first.body.emailId, 'BOUNCED');
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
  const entry = await req('GET', '/v1/suppressions/Ghost@example.net');
  t.is(entry.status, 200);
  t.is(entry.body.reason, 'HARD_BOUNCE');
  const blocked = await req('POST', '/v1/emails', sendBody(w, { to: 'ghost@example.net' }));
  t.is((await req('GET', `/v1/emails/${blocked.body.emailId}`)).body.latestStatus, 'SUPPRESSED');

  // A MANUAL entry added through the API blocks too, whatever the case of the address.
  await req('POST', '/v1/suppressions', { email: 'Manual.Block@example.net' });
  const manual = await req('POST', '/v1/emails', sendBody(w, { to: 'manual.block@EXAMPLE.net' }));
  t.is((await req('GET', `/v1/emails/${manual.body.emailId}`)).body.latestStatus, 'SUPPRESSED');

  // The mailbox exists again: remove the entry and the next send is delivered.
  t.is((await req('DELETE', '/v1/suppressions/ghost@example.net')).status, 200);
  const before = w.sink.messages.length;
  const retry = await req('POST', '/v1/emails', sendBody(w, { to: 'ghost@example.net' }));
  await waitForStatus(retry.body.emailId, 'DELIVERED');
  t.true(w.sink.messages.slice(before).some((m) => m.rcptTo.includes('ghost@example.net')));
});

// `"ann"@x` and `ann@x` are one mailbox (RFC 5321 4.1.2), and the send path writes it unquoted:
// the entry was keyed with the quotes, so it stopped no send to the mailbox in either spelling.
test.serial('a quoted local part that needs no quotes is the same entry as the plain one', async (t) => {
  const added = await req('POST', '/v1/suppressions', { email: '"Quoted.Ann"@example.net' });
  t.is(added.status, 200);
  t.is(added.body.email, 'quoted.ann@example.net');
  for (const to of ['quoted.ann@example.net', '"quoted.ann"@example.net']) {
    const sent = await req('POST', '/v1/emails', sendBody(w, { to }));
    t.is((await req('GET', `/v1/emails/${sent.body.emailId}`)).body.latestStatus, 'SUPPRESSED', to);
  }
  t.is((await req('GET', '/v1/suppressions/quoted.ann@example.net')).status, 200);
  t.is((await req('POST', '/v1/suppressions/bulk', { emails: ['"quoted.ann"@example.net', 'QUOTED.ANN@example.net'] })).body.alreadySuppressed, 1);
  t.is((await req('DELETE', `/v1/suppressions/${encodeURIComponent('"quoted.ann"@example.net')}`)).status, 200);
  // Quotes a local part needs stay: "a b" is no dot-atom.
  t.is((await req('POST', '/v1/suppressions', { email: '"A B"@example.net' })).body.email, '"a b"@example.net');
});

test.serial('suppressions are per team and need a FULL key', async (t) => {
  await req('POST', '/v1/suppressions', { email: 'mine@team.dev' });
  const key = (await twoTeams(w.t0)).b.key;
  t.is((await req('GET', '/v1/suppressions/mine@team.dev', undefined, key)).status, 404);
  t.is((await req('DELETE', '/v1/suppressions/mine@team.dev', undefined, key)).status, 404);
  t.is((await req('GET', '/v1/suppressions?search=team.dev', undefined, key)).body.total, 0);
  t.is((await req('GET', '/v1/suppressions/mine@team.dev')).status, 200);
  const sending = (await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 's', permission: 'SENDING' })).token;
  t.is((await req('GET', '/v1/suppressions', undefined, sending)).status, 403);
  t.is((await req('POST', '/v1/suppressions', { email: 'x@team.dev' }, sending)).status, 403);
});

// Two imports of one list at once, in different orders (a retried upload, two operators): each
// is answered 200 and every address is counted as added exactly once. On PostgreSQL each
// request inserted in its own order, so two of them waited on each other's rows: a deadlock,
// and all but one answered 500.
test.serial('concurrent bulk adds of the same addresses in different orders all succeed', async (t) => {
  const key = (await twoTeams(w.t0, { b: { name: 'Racing imports' } })).b.key;
  const emails = Array.from({ length: 300 }, (_, i) => `racer${i}@bulk.dev`);
  const orders = [emails, [...emails].reverse(), [...emails.slice(150), ...emails.slice(0, 150)], [...emails.slice(75).reverse(), ...emails.slice(0, 75)]];
  const results = await Promise.all(orders.map((list) => req('POST', '/v1/suppressions/bulk', { emails: list }, key)));
  t.deepEqual(results.map((r) => r.status), [200, 200, 200, 200], JSON.stringify(results.map((r) => r.body.error ?? r.body)));
  t.is(results.reduce((n, r) => n + r.body.count, 0), 300, 'each address added once');
  t.is(results.reduce((n, r) => n + r.body.alreadySuppressed, 0), 900);
  t.is((await req('GET', '/v1/suppressions?limit=1', undefined, key)).body.total, 300);
});
