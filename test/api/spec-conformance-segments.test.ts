import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// Probes of the spec's Segments table: a segment is a saved filter over a contact book, and
// GET /v1/segments/{id}/contacts evaluates it at request time.

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp();
});
test.after.always(async () => {
  await t0?.close();
});

test('Segments: an email condition (eq, neq, in) matches the address a contact was added with, its domain written in Unicode or in A-labels', async (t) => {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Segment by email' } })).body.id as string;
  const added = await t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: [{ email: 'Ute@Bücher.example' }, { email: 'other@example.net' }] });
  t.is(added.status, 200);
  const members = async (condition: Record<string, unknown>) => {
    const seg = await t0.request('POST', '/v1/segments', { body: { name: 'By email', contactBookId: book, filters: { match: 'all', conditions: [condition] } } });
    t.is(seg.status, 200, JSON.stringify(seg.body));
    const res = await t0.request('GET', `/v1/segments/${seg.body.id}/contacts`);
    return (res.body.contacts as { email: string }[]).map((c) => c.email).sort();
  };
  for (const value of ['Ute@Bücher.example', 'ute@xn--bcher-kva.example']) {
    t.deepEqual(await members({ field: 'email', op: 'eq', value }), ['ute@xn--bcher-kva.example'], `eq ${value}`);
    t.deepEqual(await members({ field: 'email', op: 'neq', value }), ['other@example.net'], `neq ${value}`);
    t.deepEqual(await members({ field: 'email', op: 'in', value: [value, 'nobody@example.net'] }), ['ute@xn--bcher-kva.example'], `in ${value}`);
  }
});
