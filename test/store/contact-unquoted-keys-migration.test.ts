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

// A contact added as `"ann"@x` was keyed with its quotes, while `ann@x` is the same mailbox
// (RFC 5321 4.1.2): one book could hold it twice, and a campaign mailed the person twice. An
// upgrade keys it without the quotes, merging a pair into the older contact.

const BEFORE = '20261129154500-suppression-unquoted-keys';
const OLD = SEEDED_AT;
const MID = '2026-11-24T09:00:00.000Z';
const NEW = '2026-11-27T09:00:00.000Z';

const storeBefore = (t: ExecutionContext, dir: string) => storeAtMigration(t, dir, BEFORE);

const addCampaign = (db: Kysely<any>, team: number, id: string, filters: string | null = null) =>
  sql`insert into campaigns (id, team_id, name, from_addr, subject, contact_book_id, status, batch_size, sent, segment_filters_json, created_at, updated_at)
    values (${id}, ${team}, 'c', 'a@news.example', 's', 'cb_1', 'SENT', 10, 1, ${filters}, ${OLD}, ${OLD})`.execute(db);
const addEmail = (db: Kysely<any>, team: number, id: string, contact: string) =>
  sql`insert into emails (id, team_id, from_addr, to_json, subject, message_id, latest_status, status_rank, contact_id, created_at, updated_at)
    values (${id}, ${team}, 'a@news.example', '["ann@example.net"]', 's', ${`<${id}@x.com>`}, 'SENT', 1, ${contact}, ${OLD}, ${OLD})`.execute(db);
const addRecipient = (db: Kysely<any>, cp: string, contact: string, em: string, unsubscribed: number) =>
  sql`insert into campaign_recipients (campaign_id, contact_id, email_id, unsubscribed) values (${cp}, ${contact}, ${em}, ${unsubscribed})`.execute(db);

async function snapshot(db: Kysely<any>) {
  const q = async (text: string) => (await sql.raw(text).execute(db)).rows;
  return {
    contacts: await q('select * from contacts order by id'),
    emails: await q('select id, contact_id from emails order by id'),
    recipients: await q('select campaign_id, contact_id, email_id, unsubscribed from campaign_recipients order by campaign_id, contact_id'),
    aliases: await q('select id, contact_id from contact_aliases order by id'),
    segments: await q('select id, filters_json from segments order by id'),
    campaigns: await q('select id, segment_filters_json from campaigns order by id'),
  };
}

const filter = (...conditions: unknown[]) => JSON.stringify({ match: 'all', conditions });

test('an upgrade keys quoted dot-atom contacts without the quotes, merges a pair into the older contact with everything that named the other, keys segment filters, and a second run changes nothing', async (t) => {
  const { db } = await storeBefore(t, tempDir(t, 'posthorn-contact-unquoted-'));
  const team = await addTeam(db, 'one');
  const other = await addTeam(db, 'two');
  await addBook(db, team, 'cb_1');
  await addBook(db, team, 'cb_2');
  await addBook(db, other, 'cb_o');
  // Alone under its key: only re-keyed.
  await addContact(db, { id: 'ct_solo', team, book: 'cb_1', email: '"solo"@example.net', first: 'Solo' });
  // The quoted one is older: it stays (its id), under the plain key, filled from the newer.
  await addContact(db, { id: 'ct_ann_q', team, book: 'cb_1', email: '"ann"@example.net', first: 'Ann', props: '{"plan":"pro","city":"Oslo"}' });
  await addContact(db, { id: 'ct_ann_p', team, book: 'cb_1', email: 'ann@example.net', last: 'Lee', subscribed: 0, reason: 'UNSUBSCRIBED', props: '{"plan":"free","tier":"b"}', at: NEW });
  // The plain one is older: it stays, the quoted one goes.
  await addContact(db, { id: 'ct_bob_p', team, book: 'cb_1', email: 'bob.b@example.net', first: 'Bob', at: OLD });
  await addContact(db, { id: 'ct_bob_q', team, book: 'cb_1', email: '"bob.b"@example.net', last: 'Brown', at: MID });
  // Each book keys its own contacts; quotes a local part needs stay; another team is its own.
  await addContact(db, { id: 'ct_ann_b2', team, book: 'cb_2', email: '"ann"@example.net' });
  await addContact(db, { id: 'ct_space', team, book: 'cb_1', email: '"a b"@example.net' });
  await addContact(db, { id: 'ct_other', team: other, book: 'cb_o', email: '"ann"@example.net' });
  // An alias from the earlier merge that led to the contact merged away now leads on.
  await sql`insert into contact_aliases (id, contact_id) values ('ct_ann_older_alias', 'ct_ann_p')`.execute(db);

  await addCampaign(db, team, 'cp_1');
  await addCampaign(db, team, 'cp_2', filter({ field: 'email', op: 'in', value: ['"ann"@example.net', 'ann@example.net', '"a b"@example.net'] }));
  await addEmail(db, team, 'em_1', 'ct_ann_p');
  await addEmail(db, team, 'em_2', 'ct_ann_q');
  await addEmail(db, team, 'em_3', 'ct_ann_p');
  await addEmail(db, team, 'em_4', 'ct_bob_q');
  // cp_1 reached the newer contact only; cp_2 reached both (one row stays: the kept contact's, unsubscribed as the other was).
  await addRecipient(db, 'cp_1', 'ct_ann_p', 'em_1', 0);
  await addRecipient(db, 'cp_2', 'ct_ann_q', 'em_2', 0);
  await addRecipient(db, 'cp_2', 'ct_ann_p', 'em_3', 1);
  await addRecipient(db, 'cp_1', 'ct_bob_q', 'em_4', 0);
  await sql`insert into segments (id, team_id, contact_book_id, name, filters_json, created_at, updated_at)
    values ('sg_1', ${team}, 'cb_1', 's', ${filter({ field: 'email', op: 'eq', value: '"bob.b"@example.net' }, { field: 'email', op: 'contains', value: '"x"@' })}, ${OLD}, ${OLD})`.execute(db);

  await migrateToLatest(db);
  const after = await snapshot(db);
  const contacts = Object.fromEntries(after.contacts.map((r: any) => [r.id, r]));
  t.deepEqual(Object.keys(contacts).sort(), ['ct_ann_b2', 'ct_ann_q', 'ct_bob_p', 'ct_other', 'ct_solo', 'ct_space']);
  t.like(contacts.ct_solo, { email: 'solo@example.net', first_name: 'Solo', updated_at: OLD });
  t.is(contacts.ct_ann_b2.email, 'ann@example.net');
  t.is(contacts.ct_other.email, 'ann@example.net');
  t.is(contacts.ct_space.email, '"a b"@example.net');
  t.like(contacts.ct_ann_q, { email: 'ann@example.net', first_name: 'Ann', last_name: 'Lee', subscribed: 0, unsubscribe_reason: 'UNSUBSCRIBED', created_at: OLD });
  t.is(contacts.ct_ann_q.properties_json, canonicalJson({ plan: 'pro', city: 'Oslo', tier: 'b' }));
  t.like(contacts.ct_bob_p, { email: 'bob.b@example.net', first_name: 'Bob', last_name: 'Brown', subscribed: 1, unsubscribe_reason: null, created_at: OLD });

  t.deepEqual(after.emails.map((r: any) => [r.id, r.contact_id]), [['em_1', 'ct_ann_q'], ['em_2', 'ct_ann_q'], ['em_3', 'ct_ann_q'], ['em_4', 'ct_bob_p']]);
  t.deepEqual(
    after.recipients.map((r: any) => [r.campaign_id, r.contact_id, r.email_id, Number(r.unsubscribed)]),
    [['cp_1', 'ct_ann_q', 'em_1', 0], ['cp_1', 'ct_bob_p', 'em_4', 0], ['cp_2', 'ct_ann_q', 'em_2', 1]],
  );
  t.deepEqual(after.aliases.map((r: any) => [r.id, r.contact_id]), [['ct_ann_older_alias', 'ct_ann_q'], ['ct_ann_p', 'ct_ann_q'], ['ct_bob_q', 'ct_bob_p']]);
  t.deepEqual(JSON.parse((after.segments[0] as any).filters_json).conditions, [{ field: 'email', op: 'eq', value: 'bob.b@example.net' }, { field: 'email', op: 'contains', value: '"x"@' }]);
  t.deepEqual(JSON.parse((after.campaigns.find((c: any) => c.id === 'cp_2') as any).segment_filters_json).conditions[0].value, ['ann@example.net', '"a b"@example.net']);

  const { up } = await import('../../src/store/migrations/20261130010000-contact-unquoted-keys.js');
  await up(db);
  t.deepEqual(await snapshot(db), after);
});

test('after the upgrade the API finds the merged contact by either spelling, and a link naming the contact merged away still works', async (t) => {
  const dir = tempDir(t, 'posthorn-contact-unquoted-app-');
  const { db, url, close } = await storeBefore(t, dir);
  const team = await addTeam(db, 'one');
  await addBook(db, team, 'cb_1');
  await addContact(db, { id: 'ct_ann_p', team, book: 'cb_1', email: 'ann@example.net' });
  await addContact(db, { id: 'ct_ann_q', team, book: 'cb_1', email: '"ann"@example.net', at: NEW });
  await addContact(db, { id: 'ct_patq', team, book: 'cb_1', email: '"pat"@example.net', subscribed: 0 });
  await addContact(db, { id: 'ct_patp', team, book: 'cb_1', email: 'pat@example.net', subscribed: 0, at: NEW });
  await addCampaign(db, team, 'cp_1');
  await addRecipient(db, 'cp_1', 'ct_ann_q', 'em_1', 0);
  await close();

  const secret = 'contact-unquoted-test-secret';
  const t0 = await startTestApp({ dataDir: dir, overrides: { store: { url }, secret } });
  t.teardown(() => t0.close());
  t.is(t0.teamId, team);
  await addVerifiedDomain(t0, 'sender.dev');
  const all = (await t0.request('GET', '/v1/contactBooks/cb_1/contacts')).body;
  t.deepEqual(all.map((c: any) => [c.id, c.email]).sort(), [['ct_ann_p', 'ann@example.net'], ['ct_patq', 'pat@example.net']]);
  for (const spelling of ['"ann"@example.net', 'Ann@example.net']) {
    const upsert = await t0.request('POST', '/v1/contactBooks/cb_1/contacts', { body: { email: spelling, firstName: 'Ann' } });
    t.is(upsert.body.contactId, 'ct_ann_p', spelling);
  }

  const link = new URL(t0.app.services.campaigns.unsubscribeUrl('cp_1', 'ct_ann_q'));
  const posted = await t0.request('POST', link.pathname, { key: null });
  t.is(posted.status, 200, String(posted.body));
  t.regex(String(posted.body), /You are unsubscribed/);
  t.false((await t0.request('GET', '/v1/contactBooks/cb_1/contacts/ct_ann_p')).body.subscribed);

  const confirmed = await t0.request('POST', `/confirm/${signConfirmationToken(secret, 'ct_patp', Date.now() + 3_600_000)}`, { key: null });
  t.is(confirmed.status, 200, String(confirmed.body));
  t.regex(String(confirmed.body), /Subscription confirmed/);
  t.true((await t0.request('GET', '/v1/contactBooks/cb_1/contacts/ct_patq')).body.subscribed);
});
