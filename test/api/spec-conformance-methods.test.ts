import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// Probes of the spec's Errors table, "METHOD_NOT_ALLOWED 405: wrong method for the route", at the
// literal routes that sit beside a parameter route: /contacts/bulk beside /contacts/{contactId},
// /suppressions/bulk beside /suppressions/{email}, /emails/batch beside /emails/{emailId}.

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp();
});
test.after.always(async () => {
  await t0?.close();
});

test('a method a literal route does not serve is 405 METHOD_NOT_ALLOWED with its Allow header, never a read or write of an id named like the literal', async (t) => {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Methods' } })).body.id as string;
  const contacts = `/v1/contactBooks/${book}/contacts`;
  const cases: [string, string, string, unknown?][] = [
    ['GET', `${contacts}/bulk`, 'POST, DELETE'],
    ['PATCH', `${contacts}/bulk`, 'POST, DELETE', { firstName: 'Bulk' }],
    ['PUT', `${contacts}/bulk`, 'POST, DELETE', { email: 'put-on-bulk@example.net' }],
    ['GET', '/v1/suppressions/bulk', 'POST'],
    ['DELETE', '/v1/suppressions/bulk', 'POST', { emails: ['a@example.net'] }],
    ['GET', '/v1/emails/batch', 'POST'],
    ['PATCH', '/v1/emails/batch', 'POST', { scheduledAt: 'in 1 hour' }],
  ];
  for (const [method, path, allow, body] of cases) {
    const res = await t0.request(method, path, body === undefined ? {} : { body });
    t.is(res.status, 405, `${method} ${path}: ${JSON.stringify(res.body)}`);
    t.is(res.body.error?.code, 'METHOD_NOT_ALLOWED', `${method} ${path}`);
    t.is(res.headers.get('allow'), allow, `${method} ${path}`);
    // Limits: the rate-limit headers are on every response, this one included.
    t.truthy(res.headers.get('x-ratelimit-limit'), `${method} ${path}`);
  }
  // The PUT wrote no contact; the served methods still work.
  t.deepEqual((await t0.request('GET', `${contacts}?emails=put-on-bulk@example.net`)).body, []);
  const added = await t0.request('POST', `${contacts}/bulk`, { body: [{ email: 'bulk-ok@example.net' }] });
  t.is(added.status, 200);
  t.is(added.body.count, 1);
  // Ids next to the literal are untouched: a missing contact is still a 404.
  t.is((await t0.request('GET', `${contacts}/ct_missing`)).status, 404);
  t.is((await t0.request('GET', '/v1/suppressions/nobody@example.net')).status, 404);
});
