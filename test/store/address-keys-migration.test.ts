import test, { type ExecutionContext } from 'ava';
import { sql, type Kysely } from 'kysely';
import { migrateToLatest } from '../../src/store/migrate.js';
import { signConfirmationToken } from '../../src/core/contacts/confirmation-token.js';
import { canonicalJson } from '../../src/lib/canonical-json.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startTestApp } from '../helpers/test-app.js';
import { storeAtMigration } from '../helpers/store-at-migration.js';
import { tempDir } from '../helpers/temp-dir.js';
import { addBook, addContact, addTeam, SEEDED_AT } from '../helpers/migration-seeds.js';

// Suppressions and contacts stored before addresses were keyed with the domain in A-labels hold
// it in Unicode (only lowercased). Every lookup compares the A-label key exactly, so such a
// suppression stopped no send and such a contact was missed (a second one was made for the same
// mailbox). An upgrade re-keys them, merging a row into the one already stored under the key.

const BEFORE = '20261129050000-segment-email-keys';
const OLD = SEEDED_AT;
const NEW = '2026-11-27T09:00:00.000Z';

const storeBefore = (t: ExecutionContext, dir: string) => storeAtMigration(t, dir, BEFORE);

const addSuppression = (db: Kysely<any>, team: number, email: string, reason: string, source: string, at: string) =>
  sql`insert into suppressions (team_id, email, reason, source, created_at) values (${team}, ${email}, ${reason}, ${source}, ${at})`.execute(db);

async function snapshot(db: Kysely<any>) {
  const q = async (text: string) => (await sql.raw(text).execute(db)).rows;
  return {
    suppressions: await q('select team_id, email, reason, source, created_at from suppressions order by team_id, email, id'),
    contacts: await q('select * from contacts order by id'),
    emails: await q('select id, contact_id from emails order by id'),
    recipients: await q('select campaign_id, contact_id, email_id, unsubscribed from campaign_recipients order by campaign_id, contact_id'),
    aliases: await q('select id, contact_id from contact_aliases order by id'),
  };
}

test('an upgrade keys Unicode domains of suppressions and contacts in A-labels, merging into a row already under the key, and a second run changes nothing', async (t) => {
  const { db } = await storeBefore(t, tempDir(t, 'posthorn-address-keys-'));
  const team = await addTeam(db, 'one');
  const other = await addTeam(db, 'two');

  await addSuppression(db, team, 'someone@bücher.example', 'HARD_BOUNCE', 'em_a', OLD);
  // Under both keys: one row stays, with the first reason and source (why it was first stopped).
  await addSuppression(db, team, 'ann@bücher.example', 'COMPLAINT', 'em_b', OLD);
  await addSuppression(db, team, 'ann@xn--bcher-kva.example', 'MANUAL', 'api', NEW);
  await addSuppression(db, team, 'bob@bücher.example', 'MANUAL', 'api', NEW);
  await addSuppression(db, team, 'bob@xn--bcher-kva.example', 'HARD_BOUNCE', 'em_c', OLD);
  // Two Unicode spellings of one domain (NFD and NFC) are one key.
  await addSuppression(db, team, 'cy@bu\u0308cher.example', 'MANUAL', 'nfd', NEW);
  await addSuppression(db, team, 'cy@bücher.example', 'COMPLAINT', 'nfc', OLD);
  // A non-ASCII local part stays as it is (addressKey's rule); an ASCII row is never touched.
  await addSuppression(db, team, 'jürgen@example.net', 'MANUAL', 'x', OLD);
  await addSuppression(db, team, 'jürgen@bücher.example', 'MANUAL', 'x', OLD);
  await addSuppression(db, team, 'plain@example.net', 'MANUAL', 'x', OLD);
  // Another team's list is its own.
  await addSuppression(db, other, 'ann@bücher.example', 'MANUAL', 'other', OLD);

  await addBook(db, team, 'cb_1');
  await addBook(db, team, 'cb_2');
  await addContact(db, { id: 'ct_ute', team, book: 'cb_1', email: 'ute@bücher.example', first: 'Ute' });
  await addContact(db, { id: 'ct_max_old', team, book: 'cb_1', email: 'max@bücher.example', first: 'Max', subscribed: 0, reason: 'UNSUBSCRIBED', props: '{"plan":"pro","city":"Köln"}' });
  await addContact(db, { id: 'ct_max_new', team, book: 'cb_1', email: 'max@xn--bcher-kva.example', last: 'Muster', props: '{"plan":"free"}', at: NEW });
  await addContact(db, { id: 'ct_max_b2', team, book: 'cb_2', email: 'max@bücher.example' });
  await addContact(db, { id: 'ct_jo', team, book: 'cb_1', email: 'jö@example.net' });

  const campaign = (id: string) =>
    sql`insert into campaigns (id, team_id, name, from_addr, subject, contact_book_id, status, batch_size, created_at, updated_at)
      values (${id}, ${team}, 'c', 'a@news.example', 's', 'cb_1', 'SENT', 10, ${OLD}, ${OLD})`.execute(db);
  await campaign('cp_1');
  await campaign('cp_2');
  const email = (id: string, contact: string) =>
    sql`insert into emails (id, team_id, from_addr, to_json, subject, message_id, latest_status, status_rank, contact_id, created_at, updated_at)
      values (${id}, ${team}, 'a@news.example', '["max@bücher.example"]', 's', ${`<${id}@x.com>`}, 'SENT', 1, ${contact}, ${OLD}, ${OLD})`.execute(db);
  await email('em_1', 'ct_max_old');
  await email('em_2', 'ct_max_old');
  await email('em_3', 'ct_max_new');
  const recipient = (cp: string, contact: string, em: string, unsubscribed: number) =>
    sql`insert into campaign_recipients (campaign_id, contact_id, email_id, unsubscribed) values (${cp}, ${contact}, ${em}, ${unsubscribed})`.execute(db);
  await recipient('cp_1', 'ct_max_old', 'em_1', 1);
  await recipient('cp_2', 'ct_max_old', 'em_2', 1);
  await recipient('cp_2', 'ct_max_new', 'em_3', 0);

  await migrateToLatest(db);
  const after = await snapshot(db);
  const sup = (teamId: number) => after.suppressions.filter((r: any) => Number(r.team_id) === teamId).map((r: any) => ({ email: r.email, reason: r.reason, source: r.source, created_at: r.created_at }));
  t.deepEqual(sup(team), [
    { email: 'ann@xn--bcher-kva.example', reason: 'COMPLAINT', source: 'em_b', created_at: OLD },
    { email: 'bob@xn--bcher-kva.example', reason: 'HARD_BOUNCE', source: 'em_c', created_at: OLD },
    { email: 'cy@xn--bcher-kva.example', reason: 'COMPLAINT', source: 'nfc', created_at: OLD },
    { email: 'jürgen@example.net', reason: 'MANUAL', source: 'x', created_at: OLD },
    { email: 'jürgen@xn--bcher-kva.example', reason: 'MANUAL', source: 'x', created_at: OLD },
    { email: 'plain@example.net', reason: 'MANUAL', source: 'x', created_at: OLD },
    { email: 'someone@xn--bcher-kva.example', reason: 'HARD_BOUNCE', source: 'em_a', created_at: OLD },
  ]);
  t.deepEqual(sup(other), [{ email: 'ann@xn--bcher-kva.example', reason: 'MANUAL', source: 'other', created_at: OLD }]);

  const contacts = Object.fromEntries(after.contacts.map((r: any) => [r.id, r]));
  t.deepEqual(Object.keys(contacts).sort(), ['ct_jo', 'ct_max_b2', 'ct_max_new', 'ct_ute']);
  t.is(contacts.ct_ute.email, 'ute@xn--bcher-kva.example');
  t.is(contacts.ct_ute.first_name, 'Ute');
  t.is(contacts.ct_max_b2.email, 'max@xn--bcher-kva.example', 'each book keys its own contacts');
  t.is(contacts.ct_jo.email, 'jö@example.net');
  // The A-label row stays (what lookups found since), unsubscribed since the old one was,
  // filled with what only the old one knew, and a contact since the old one was made.
  const max = contacts.ct_max_new;
  t.like(max, { email: 'max@xn--bcher-kva.example', first_name: 'Max', last_name: 'Muster', subscribed: 0, unsubscribe_reason: 'UNSUBSCRIBED', created_at: OLD });
  t.deepEqual(JSON.parse(max.properties_json), { plan: 'free', city: 'Köln' });
  // Stored as every write stores properties (canonical JSON, keys sorted): otherwise a later
  // import of the same properties reads as a change (contact.updated, updated_at moved).
  t.is(max.properties_json, canonicalJson({ plan: 'free', city: 'Köln' }));
  // What pointed at the old contact points at the one kept; a campaign that reached both keeps one row.
  t.deepEqual(after.emails.map((r: any) => [r.id, r.contact_id]), [['em_1', 'ct_max_new'], ['em_2', 'ct_max_new'], ['em_3', 'ct_max_new']]);
  t.deepEqual(
    after.recipients.map((r: any) => [r.campaign_id, r.contact_id, r.email_id, Number(r.unsubscribed)]),
    [['cp_1', 'ct_max_new', 'em_1', 1], ['cp_2', 'ct_max_new', 'em_3', 1]],
  );
  // Links in mail already sent still name the merged contact: its id leads to the kept one.
  t.deepEqual(after.aliases.map((r: any) => [r.id, r.contact_id]), [['ct_max_old', 'ct_max_new']]);

  // Idempotent: the migration run again on the keyed store changes nothing.
  const { up } = await import('../../src/store/migrations/20261129060000-address-keys.js');
  await up(db);
  t.deepEqual(await snapshot(db), after);
});

test('after the upgrade an old suppression stops a send to either spelling, the contacts API finds and updates the old contact, and a merged contact\'s unsubscribe and confirmation links still work', async (t) => {
  const dir = tempDir(t, 'posthorn-address-keys-app-');
  const { db, url, close } = await storeBefore(t, dir);
  const team = await addTeam(db, 'one');
  await addSuppression(db, team, 'someone@bücher.example', 'HARD_BOUNCE', 'em_a', OLD);
  await addBook(db, team, 'cb_1');
  await addContact(db, { id: 'ct_ute', team, book: 'cb_1', email: 'ute@bücher.example', first: 'Ute' });
  // Reached by a campaign under the old key, then made again under the new one.
  await addContact(db, { id: 'ct_max_old', team, book: 'cb_1', email: 'max@bücher.example' });
  await addContact(db, { id: 'ct_max_new', team, book: 'cb_1', email: 'max@xn--bcher-kva.example', at: NEW });
  await sql`insert into campaigns (id, team_id, name, from_addr, subject, contact_book_id, status, batch_size, sent, created_at, updated_at)
    values ('cp_1', ${team}, 'c', 'a@news.example', 's', 'cb_1', 'SENT', 10, 1, ${OLD}, ${OLD})`.execute(db);
  await sql`insert into campaign_recipients (campaign_id, contact_id, email_id) values ('cp_1', 'ct_max_old', 'em_1')`.execute(db);
  // Double opt-in pending under both keys: the confirmation mailed first names the old contact.
  await addContact(db, { id: 'ct_patold', team, book: 'cb_1', email: 'pat@bücher.example', subscribed: 0 });
  await addContact(db, { id: 'ct_patnew', team, book: 'cb_1', email: 'pat@xn--bcher-kva.example', subscribed: 0, at: NEW });
  await close();

  const secret = 'address-keys-test-secret';
  const t0 = await startTestApp({ dataDir: dir, overrides: { store: { url }, secret } });
  t.teardown(() => t0.close());
  t.is(t0.teamId, team);
  await addVerifiedDomain(t0, 'sender.dev');
  for (const to of ['Someone@Bücher.example', 'someone@xn--bcher-kva.example']) {
    const sent = await t0.request('POST', '/v1/emails', { body: { from: 'hello@sender.dev', to, subject: 'Hi', text: 'Hi' } });
    t.is(sent.status, 200, JSON.stringify(sent.body));
    t.is((await t0.request('GET', `/v1/emails/${sent.body.emailId}`)).body.latestStatus, 'SUPPRESSED', to);
  }
  t.is((await t0.request('GET', `/v1/suppressions/${encodeURIComponent('someone@bücher.example')}`)).body.reason, 'HARD_BOUNCE');

  const found = await t0.request('GET', `/v1/contactBooks/cb_1/contacts?emails=${encodeURIComponent('Ute@Bücher.example')}`);
  t.deepEqual(found.body.map((c: any) => c.id), ['ct_ute']);
  const upsert = await t0.request('POST', '/v1/contactBooks/cb_1/contacts', { body: { email: 'ute@bücher.example', lastName: 'Muster' } });
  t.is(upsert.status, 200, JSON.stringify(upsert.body));
  t.is(upsert.body.contactId, 'ct_ute', 'the same mailbox updates the contact instead of making a second one');
  const all = (await t0.request('GET', '/v1/contactBooks/cb_1/contacts')).body;
  t.deepEqual(all.map((c: any) => [c.id, c.email, c.firstName, c.lastName]).sort(), [
    ['ct_max_new', 'max@xn--bcher-kva.example', null, null],
    ['ct_patnew', 'pat@xn--bcher-kva.example', null, null],
    ['ct_ute', 'ute@xn--bcher-kva.example', 'Ute', 'Muster'],
  ]);

  // The link in the campaign's email names the contact merged away.
  const link = new URL(t0.app.services.campaigns.unsubscribeUrl('cp_1', 'ct_max_old'));
  const posted = await t0.request('POST', link.pathname, { key: null });
  t.is(posted.status, 200);
  t.regex(String(posted.body), /You are unsubscribed/);
  const max = (await t0.request('GET', '/v1/contactBooks/cb_1/contacts/ct_max_new')).body;
  t.false(max.subscribed);
  t.is((await t0.request('GET', '/v1/campaigns/cp_1')).body.unsubscribed, 1, 'counted for the campaign that reached the mailbox');

  const confirmed = await t0.request('POST', `/confirm/${signConfirmationToken(secret, 'ct_patold', Date.now() + 3_600_000)}`, { key: null });
  t.is(confirmed.status, 200);
  t.regex(String(confirmed.body), /Subscription confirmed/);
  t.true((await t0.request('GET', '/v1/contactBooks/cb_1/contacts/ct_patnew')).body.subscribed);
});

test('an alias goes with the contact it leads to: once the kept contact is deleted, a link naming the merged one reaches nobody, also not a contact made again for the mailbox', async (t) => {
  const dir = tempDir(t, 'posthorn-address-keys-delete-');
  const { db, url, close } = await storeBefore(t, dir);
  const team = await addTeam(db, 'one');
  await addBook(db, team, 'cb_1');
  await addContact(db, { id: 'ct_max_old', team, book: 'cb_1', email: 'max@bücher.example' });
  await addContact(db, { id: 'ct_max_new', team, book: 'cb_1', email: 'max@xn--bcher-kva.example', at: NEW });
  await sql`insert into campaigns (id, team_id, name, from_addr, subject, contact_book_id, status, batch_size, sent, created_at, updated_at)
    values ('cp_1', ${team}, 'c', 'a@news.example', 's', 'cb_1', 'SENT', 10, 1, ${OLD}, ${OLD})`.execute(db);
  await close();

  const secret = 'address-keys-test-secret';
  const t0 = await startTestApp({ dataDir: dir, overrides: { store: { url }, secret } });
  t.teardown(() => t0.close());
  const aliases = async () => (await sql`select id, contact_id from contact_aliases`.execute(t0.app.store.db as Kysely<any>)).rows;
  t.deepEqual(await aliases(), [{ id: 'ct_max_old', contact_id: 'ct_max_new' }]);

  t.is((await t0.request('DELETE', '/v1/contactBooks/cb_1/contacts/ct_max_new')).status, 200);
  t.deepEqual(await aliases(), []);
  const again = await t0.request('POST', '/v1/contactBooks/cb_1/contacts', { body: { email: 'max@bücher.example' } });
  t.is(again.status, 200, JSON.stringify(again.body));

  const link = new URL(t0.app.services.campaigns.unsubscribeUrl('cp_1', 'ct_max_old'));
  t.is((await t0.request('POST', link.pathname, { key: null })).status, 400);
  t.true((await t0.request('GET', `/v1/contactBooks/cb_1/contacts/${again.body.contactId}`)).body.subscribed);
  const confirmed = await t0.request('POST', `/confirm/${signConfirmationToken(secret, 'ct_max_old', Date.now() + 3_600_000)}`, { key: null });
  t.notRegex(String(confirmed.body), /Subscription confirmed/);
});
