import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// Probes of the spec's Contacts table: GET /v1/contactBooks/{id}/contacts takes `emails` and
// finds a contact by the address it was added with.

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp();
});
test.after.always(async () => {
  await t0?.close();
});

test('Contacts, list: the emails filter finds a contact by the address as it was added, however written (case, spaces, an internationalised domain)', async (t) => {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Filter by email' } })).body.id as string;
  const path = `/v1/contactBooks/${book}/contacts`;
  const added = await t0.request('POST', path, { body: { email: 'Ute@Bücher.example' } });
  t.is(added.status, 200);
  const id = added.body.contactId as string;
  t.is((await t0.request('GET', `${path}/${id}`)).body.email, 'ute@xn--bcher-kva.example');
  for (const given of ['Ute@Bücher.example', ' ute@BÜCHER.example ', 'ute@xn--bcher-kva.example', 'other@example.net,Ute@Bücher.example']) {
    const res = await t0.request('GET', `${path}?emails=${encodeURIComponent(given)}`);
    t.is(res.status, 200, given);
    t.deepEqual(
      res.body.map((c: { id: string }) => c.id),
      [id],
      `emails=${given}`,
    );
  }
  // An address nobody has, or no address at all, finds nothing and is no error.
  for (const given of ['nobody@bücher.example', 'not-an-address']) {
    const res = await t0.request('GET', `${path}?emails=${encodeURIComponent(given)}`);
    t.is(res.status, 200, given);
    t.deepEqual(res.body, [], given);
  }
});
