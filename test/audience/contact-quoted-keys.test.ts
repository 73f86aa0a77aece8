import test from 'ava';
import { pino } from 'pino';
import { createContactImportService } from '../../src/core/contacts/contact-import-service.js';
import { createContactImportsRepository } from '../../src/store/repositories/contact-imports-repository.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { campaignFixtures } from '../helpers/campaign-fixtures.js';

// `"ann"@x` and `ann@x` are one mailbox (RFC 5321 4.1.2: quotes a dot-atom local part does not
// need change nothing), and a send writes it unquoted. A contact keyed with the quotes was a
// second contact for the mailbox in one book, so a campaign to the book mailed the person twice.

let w: MailWorld;
test.before(async () => {
  w = await startMailWorld();
});
test.after.always(async () => {
  await w?.close();
});

const doc = JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'Body' }] }] });
const { campaign, get, run } = campaignFixtures(() => w, () => ({ name: 'Quoted', from: `News <news@${w.domain.name}>`, subject: 'Hello', content: doc }));
const req = (method: string, path: string, body?: unknown) => w.t0.request(method, path, body === undefined ? {} : { body });
const contactsPath = (bookId: string, rest = '') => `/v1/contactBooks/${bookId}/contacts${rest}`;

async function newBook(name: string): Promise<string> {
  const b = await req('POST', '/v1/contactBooks', { name });
  if (b.status !== 200) throw new Error(JSON.stringify(b.body));
  return b.body.id as string;
}

test.serial('a quoted local part that needs no quotes is the same contact as the plain one, and a campaign mails the person once', async (t) => {
  const bookId = await newBook('Quoted');
  const quoted = await req('POST', contactsPath(bookId), { email: '"Ann.Q"@example.net', firstName: 'Ann' });
  t.is(quoted.status, 200, JSON.stringify(quoted.body));
  const plain = await req('POST', contactsPath(bookId), { email: 'ann.q@example.net', lastName: 'Quinn' });
  t.is(plain.status, 200, JSON.stringify(plain.body));
  t.is(plain.body.contactId, quoted.body.contactId, 'the same mailbox updates the contact instead of making a second one');
  const all = (await req('GET', contactsPath(bookId))).body;
  t.deepEqual(all.map((c: any) => [c.id, c.email, c.firstName, c.lastName]), [[quoted.body.contactId, 'ann.q@example.net', 'Ann', 'Quinn']]);

  // Every lookup takes either spelling.
  const byEmail = await req('GET', contactsPath(bookId, `?emails=${encodeURIComponent('"ann.q"@example.net')}`));
  t.deepEqual(byEmail.body.map((c: any) => c.id), [quoted.body.contactId]);
  const put = await req('PUT', contactsPath(bookId, '/ct_notknown'), { email: '"ann.q"@example.net', properties: { plan: 'pro' } });
  t.is(put.body.contactId, quoted.body.contactId, 'PUT of an unknown id falls back to the address');
  const bulk = await req('POST', contactsPath(bookId, '/bulk'), [{ email: '"ann.q"@example.net' }, { email: 'ANN.Q@example.net' }]);
  t.is(bulk.status, 200, JSON.stringify(bulk.body));
  t.is((await req('GET', contactsPath(bookId))).body.length, 1, 'bulk add updates the contact');
  const seg = await req('POST', '/v1/segments', { name: 's', contactBookId: bookId, filters: { match: 'all', conditions: [{ field: 'email', op: 'eq', value: '"ann.q"@example.net' }] } });
  t.is(seg.status, 200, JSON.stringify(seg.body));
  t.deepEqual((await req('GET', `/v1/segments/${seg.body.id}/contacts`)).body.contacts.map((c: any) => c.id), [quoted.body.contactId]);
  t.deepEqual((await w.t0.app.services.contacts.findInBook(w.t0.teamId, bookId, '"ann.q"@example.net'))?.id, quoted.body.contactId);
  const found = await w.t0.app.services.contacts.search({ teamId: w.t0.teamId, domainId: null }, bookId, { search: '"ann.q"@example.net', offset: 0, limit: 10 });
  t.deepEqual(found.items.map((c) => c.id), [quoted.body.contactId], 'a search for the quoted spelling finds the contact');

  // A CSV cell holding the quoted spelling ("" is a quote inside a quoted CSV field).
  const imports = createContactImportService({ imports: createContactImportsRepository(w.t0.app.store.db), contacts: w.t0.app.services.contacts, clock: w.t0.app.clock, logger: pino({ level: 'silent' }), node: 'n', cluster: false, retryDelayMs: 10 });
  t.teardown(() => imports.stop());
  const job = await imports.start({ teamId: w.t0.teamId, domainId: null }, bookId, 'q.csv', 'email,city\n"""ann.q""@example.net",Oslo\n');
  await imports.whenFinished(job.id);
  t.like(await imports.get({ teamId: w.t0.teamId, domainId: null }, job.id), { status: 'DONE', errorCount: 0 });
  const after = (await req('GET', contactsPath(bookId))).body;
  t.is(after.length, 1);
  t.is(after[0].properties.city, 'Oslo');

  const c = await campaign(bookId, { sendNow: true });
  await run();
  await run();
  t.is((await get(c.id)).total, 1);
  t.is(w.sink.messages.filter((m) => m.rcptTo.includes('ann.q@example.net')).length, 1, 'mailed once');
  // Quotes a local part needs stay: "a b" is no dot-atom.
  t.is((await req('POST', contactsPath(bookId), { email: '"A B"@example.net' })).status, 200);
  t.true((await req('GET', contactsPath(bookId))).body.some((x: any) => x.email === '"a b"@example.net'));
});
