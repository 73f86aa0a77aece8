import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';
import { startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';

let t0: TestApp;
let receiver: WebhookReceiver;
let domainA: number;
let domainB: number;

test.before(async () => {
  t0 = await startTestApp({ overrides: { webhooks: { allowPrivate: true } } });
  receiver = await startWebhookReceiver();
  domainA = (await t0.request('POST', '/v1/domains', { body: { name: 'alpha.dev', region: 'local' } })).body.id;
  domainB = (await t0.request('POST', '/v1/domains', { body: { name: 'beta.dev', region: 'local' } })).body.id;
});
test.after.always(async () => {
  await t0?.close();
  await receiver?.close();
});

const create = (body: unknown, key?: string) => t0.request('POST', '/v1/webhooks', { body, key });

test.serial('create returns the endpoint with its secret once; reads never show it', async (t) => {
  const res = await create({ url: receiver.url, eventTypes: ['email.delivered', 'email.bounced', 'email.delivered'], description: 'prod' });
  t.is(res.status, 200);
  t.regex(res.body.id, /^wh_[A-Za-z0-9]{21}$/);
  t.regex(res.body.secret, /^whsec_[0-9a-f]{64}$/);
  t.deepEqual(res.body.eventTypes, ['email.delivered', 'email.bounced']);
  t.deepEqual(res.body.domainIds, []);
  t.is(res.body.description, 'prod');
  t.is(res.body.url, receiver.url);
  t.is(res.body.status, 'ACTIVE');
  t.truthy(res.body.createdAt);

  const got = await t0.request('GET', `/v1/webhooks/${res.body.id}`);
  t.is(got.status, 200);
  t.is(got.body.secret, undefined);
  t.is(got.body.id, res.body.id);

  const list = await t0.request('GET', '/v1/webhooks');
  t.is(list.status, 200);
  t.true(Array.isArray(list.body.webhooks));
  t.true(list.body.webhooks.every((w: any) => w.secret === undefined));
  t.like(list.body, { page: 1, limit: 25, hasMore: false });
  t.is(list.body.total, list.body.webhooks.length);

  const patched = await t0.request('PATCH', `/v1/webhooks/${res.body.id}`, { body: { description: null, domainIds: [domainB, domainA] } });
  t.is(patched.status, 200);
  t.is(patched.body.secret, undefined, 'no secret unless rotated');
  t.is(patched.body.description, null);
  t.deepEqual(patched.body.domainIds, [domainA, domainB].sort((a, b) => a - b));

  const rotated = await t0.request('PATCH', `/v1/webhooks/${res.body.id}`, { body: { rotateSecret: true } });
  t.is(rotated.status, 200);
  t.regex(rotated.body.secret, /^whsec_[0-9a-f]{64}$/);
  t.not(rotated.body.secret, res.body.secret);
});

test.serial('bad input is a 400 naming the field, never a 500', async (t) => {
  const cases: [unknown, RegExp][] = [
    [{ eventTypes: ['email.sent'] }, /^url:/],
    [{ url: receiver.url }, /^eventTypes:/],
    [{ url: receiver.url, eventTypes: ['email.nope'] }, /^eventTypes\[0\]: must be one of/],
    [{ url: receiver.url, eventTypes: 'email.sent' }, /^eventTypes:/],
    [{ url: 'ftp://example.com/x', eventTypes: [] }, /^url: only http and https/],
    [{ url: 'not a url', eventTypes: [] }, /^url: must be an absolute http or https URL/],
    [{ url: 'javascript:alert(1)', eventTypes: [] }, /^url: only http and https/],
    [{ url: `http://example.com/${'x'.repeat(2100)}`, eventTypes: [] }, /^url:/],
    [{ url: 'http://nowhere.invalid/hook', eventTypes: [] }, /^url: the host nowhere\.invalid does not resolve/],
    [{ url: receiver.url, eventTypes: [], domainIds: [987654] }, /^domainIds\[0\]: domain 987654 does not exist/],
    [{ url: receiver.url, eventTypes: [], domainIds: ['1'] }, /^domainIds\[0\]:/],
    [{ url: receiver.url, eventTypes: [], description: 'x'.repeat(501) }, /^description:/],
    [{ url: receiver.url, eventTypes: [], secret: 'mine' }, /secret/],
    // The URL parser drops tabs and line breaks: the endpoint shown would not be the one called.
    [{ url: receiver.url.replace('/hook', '/ho\tok'), eventTypes: [] }, /^url: must not contain tabs, line breaks or other control characters/],
    [{ url: receiver.url.replace('127.0.0.1', '127.0.0.1\n.evil'), eventTypes: [] }, /^url: must not contain tabs/],
  ];
  for (const [body, message] of cases) {
    const res = await create(body);
    t.is(res.status, 400, JSON.stringify(body).slice(0, 80));
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, message);
  }
  const malformed = await t0.request('POST', '/v1/webhooks', { rawBody: '{"url":' });
  t.is(malformed.status, 400);

  const made = (await create({ url: receiver.url, eventTypes: [] })).body;
  for (const [body, message] of [
    [{ rotateSecret: 'yes' }, /^rotateSecret:/],
    [{ url: 'gopher://x' }, /^url:/],
    [{ url: `${receiver.url}\r\nx` }, /^url: must not contain tabs/],
    [{ eventTypes: ['nope'] }, /^eventTypes\[0\]:/],
    [{ status: 'AUTO_DISABLED' }, /^status: must be ACTIVE or PAUSED/],
  ] as [unknown, RegExp][]) {
    const res = await t0.request('PATCH', `/v1/webhooks/${made.id}`, { body });
    t.is(res.status, 400);
    t.regex(res.body.error.message, message);
  }
  const attempts = await t0.request('GET', `/v1/webhooks/${made.id}/attempts?limit=0`);
  t.is(attempts.status, 400);
  t.regex(attempts.body.error.message, /^limit:/);
  const bad = await t0.request('GET', `/v1/webhooks/${made.id}/attempts?cursor=bm9wZQ`);
  t.is(bad.status, 400);
  t.regex(bad.body.error.message, /^cursor:/);
});

test.serial('unknown and deleted endpoints are 404; deleting twice is 404', async (t) => {
  t.is((await t0.request('GET', '/v1/webhooks/wh_doesnotexist')).status, 404);
  t.is((await t0.request('GET', '/v1/webhooks/%00weird')).status, 404);
  const made = (await create({ url: receiver.url, eventTypes: [] })).body;
  const del = await t0.request('DELETE', `/v1/webhooks/${made.id}`);
  t.is(del.status, 200);
  t.like(del.body, { id: made.id, success: true });
  t.is((await t0.request('DELETE', `/v1/webhooks/${made.id}`)).status, 404);
  t.is((await t0.request('GET', `/v1/webhooks/${made.id}`)).status, 404);
  t.is((await t0.request('PATCH', `/v1/webhooks/${made.id}`, { body: { description: 'x' } })).status, 404);
  t.is((await t0.request('POST', `/v1/webhooks/${made.id}/test`)).status, 404);
  t.is((await t0.request('GET', `/v1/webhooks/${made.id}/attempts`)).status, 404);
});

test.serial('SENDING keys may not manage webhooks; another team cannot see them', async (t) => {
  const sending = (await t0.app.services.apiKeys.create(t0.teamId, { name: 's', permission: 'SENDING' })).token;
  const res = await t0.request('GET', '/v1/webhooks', { key: sending });
  t.is(res.status, 403);
  t.is(res.body.error.code, 'FORBIDDEN');

  const made = (await create({ url: receiver.url, eventTypes: [] })).body;
  const otherKey = (await twoTeams(t0)).b.key;
  t.is((await t0.request('GET', `/v1/webhooks/${made.id}`, { key: otherKey })).status, 404);
  t.is((await t0.request('DELETE', `/v1/webhooks/${made.id}`, { key: otherKey })).status, 404);
  const theirs = await t0.request('GET', '/v1/webhooks', { key: otherKey });
  t.is(theirs.body.total, 0);
});

test.serial('a key bound to a domain manages only endpoints restricted to that domain', async (t) => {
  const bound = (await t0.app.services.apiKeys.create(t0.teamId, { name: 'b', permission: 'FULL', domainId: domainA })).token;
  const made = await create({ url: receiver.url, eventTypes: ['email.sent'] }, bound);
  t.is(made.status, 200);
  t.deepEqual(made.body.domainIds, [domainA], 'restricted to the key domain by default');
  const other = await create({ url: receiver.url, eventTypes: [], domainIds: [domainB] }, bound);
  t.is(other.status, 403);
  const widen = await t0.request('PATCH', `/v1/webhooks/${made.body.id}`, { body: { domainIds: [domainA, domainB] }, key: bound });
  t.is(widen.status, 403);

  const teamWide = (await create({ url: receiver.url, eventTypes: [] })).body;
  t.is((await t0.request('GET', `/v1/webhooks/${teamWide.id}`, { key: bound })).status, 404);
  const list = await t0.request('GET', '/v1/webhooks', { key: bound });
  t.deepEqual(
    list.body.webhooks.map((w: any) => w.id),
    [made.body.id],
  );
});

test.serial('test send delivers webhook.test to that endpoint only, whatever its filter; attempts are cursor-paginated', async (t) => {
  const made = (await create({ url: receiver.url, eventTypes: ['email.bounced'] })).body;
  const before = receiver.calls.length;
  const sent: string[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await t0.request('POST', `/v1/webhooks/${made.id}/test`);
    t.is(res.status, 200);
    t.true(res.body.success);
    t.regex(res.body.eventId, /^ev_[A-Za-z0-9]{21}$/);
    sent.push(res.body.eventId);
  }
  await receiver.waitFor(before + 5);
  await t0.app.webhookDispatcher.whenIdle();
  const got = receiver.calls.slice(before);
  t.deepEqual(got.map((c) => c.json.id).sort(), [...sent].sort());
  for (const c of got) {
    t.is(c.json.type, 'webhook.test');
    t.like(c.json.data, { test: true, webhookId: made.id });
    t.truthy(c.json.data.sentAt);
  }

  const seen: string[] = [];
  let cursor: string | null = null;
  const pages: number[] = [];
  do {
    const q: string = cursor ? `?limit=2&cursor=${cursor}` : '?limit=2';
    const page: any = await t0.request('GET', `/v1/webhooks/${made.id}/attempts${q}`);
    t.is(page.status, 200);
    pages.push(page.body.attempts.length);
    for (const a of page.body.attempts) {
      seen.push(a.eventId);
      t.regex(a.id, /^wa_/);
      t.is(a.status, 'SUCCEEDED');
      t.is(a.attempt, 1);
      t.is(a.response.status, 200);
      t.is(a.response.body, 'ok');
      t.is(a.request.url, receiver.url);
      t.regex(a.request.headers['X-Service-Signature'], /^v1=[0-9a-f]{64}$/);
      t.is(JSON.parse(a.request.body).id, a.eventId);
      t.is(a.nextAttemptAt, null);
      t.is(typeof a.durationMs, 'number');
    }
    cursor = page.body.nextCursor;
  } while (cursor);
  t.deepEqual(pages, [2, 2, 1]);
  t.deepEqual([...seen].sort(), [...sent].sort());
  t.is(new Set(seen).size, 5);
});

// The per-team limit holds under concurrent creates: on PostgreSQL every request counted the
// team's endpoints before any of them inserted, so a burst went past the limit.
test.serial('a team has at most 100 endpoints, also when creates arrive at once', async (t) => {
  const key = (await twoTeams(t0, { b: { name: 'Many endpoints' } })).b.key;
  for (let i = 0; i < 98; i++) t.is((await create({ url: receiver.url, eventTypes: [] }, key)).status, 200);
  const burst = await Promise.all(Array.from({ length: 8 }, () => create({ url: receiver.url, eventTypes: [] }, key)));
  t.deepEqual(burst.map((r) => r.status).sort(), [200, 200, 400, 400, 400, 400, 400, 400], JSON.stringify(burst.map((r) => r.body.error?.message)));
  for (const r of burst.filter((r) => r.status === 400)) t.regex(r.body.error.message, /^url: a team may have at most 100 webhook endpoints/);
  t.is((await t0.request('GET', '/v1/webhooks?limit=1', { key })).body.total, 100);
});
