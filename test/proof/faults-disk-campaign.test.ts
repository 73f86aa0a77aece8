import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { sqliteStoreOf } from '../helpers/repositories.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { fullDisk, type FullDisk } from './helpers/full-disk.js';

// Proof: a campaign batch on a nearly full disk. Small messages still fit, a large one does
// not (SQLite's real SQLITE_FULL, helpers/full-disk.ts): the contact whose message could not be
// stored is not skipped; it gets the campaign once the disk is freed, and nobody gets it twice.

const clock = new ManualClock(Date.UTC(2026, 7, 2, 8, 0, 0));
const VARIABLES = Array.from({ length: 100 }, (_, i) => `p${i}`);

let w: MailWorld;
let disk: FullDisk;

test.before(async () => {
  w = await startMailWorld({ clock, overrides: { campaigns: { batchWindowSeconds: 60 } } });
  disk = fullDisk(w.t0.app);
});
test.after.always(async () => {
  await disk?.free().catch(() => {});
  await w?.close();
});

test('a contact whose campaign message could not be stored is mailed after the disk is freed, not skipped', async (t) => {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Near full', variables: VARIABLES } })).body as { id: string };
  // big@ personalises to ~400 KB (html and text): a hundred overflow pages; the others to a few hundred bytes.
  const big = Object.fromEntries(VARIABLES.map((v) => [v, 'x'.repeat(2000)]));
  const contacts = [{ email: 'small1@example.net' }, { email: 'big@example.net', properties: big }, { email: 'small2@example.net' }, { email: 'small3@example.net' }];
  const bulk = await w.t0.request('POST', `/v1/contactBooks/${book.id}/contacts/bulk`, { body: contacts });
  t.is(bulk.status, 200, JSON.stringify(bulk.body));
  const html = `<p>${VARIABLES.map((v) => `{{${v},fallback=-}}`).join(' ')}</p>`;
  const created = await w.t0.request('POST', '/v1/campaigns', { body: { name: 'Near full', from: `news@${w.domain.name}`, subject: 'Hi', contactBookId: book.id, html, sendNow: true } });
  t.is(created.status, 200, JSON.stringify(created.body));
  const id = (created.body as { id: string }).id;

  // Full, then a few dozen pages freed: room for the small messages, not for the big one.
  await disk.fill();
  const { sqlite, db } = sqliteStoreOf(w.t0.app);
  await db.connection().execute(async () => {
    sqlite.exec('delete from proof_disk_filler where rowid in (select rowid from proof_disk_filler where length(b) = 4000 limit 40)');
  });
  await w.t0.app.runCampaigns();
  await w.t0.app.services.events.settled();
  // Contacts go in id order (random ids): the small ones before the big one are stored; the
  // chunk may stop at the big one's storage failure, so those after it wait for the next batch.
  const bigId = ((await w.t0.request('GET', `/v1/contactBooks/${book.id}/contacts?emails=big@example.net`)).body as { id: string }[])[0]!.id;
  const reached = await db.selectFrom('campaign_recipients').select('contact_id').where('campaign_id', '=', id).execute();
  t.false(reached.some((r) => r.contact_id === bigId), 'the big message was not stored');
  t.true(reached.length <= 3);
  await disk.free();

  for (let i = 0; i < 4; i++) {
    clock.advance(60_000);
    await w.t0.app.runCampaigns();
    await w.settle();
  }
  const counts = new Map<string, number>();
  for (const m of w.sink.messages) for (const r of m.rcptTo) counts.set(r, (counts.get(r) ?? 0) + 1);
  t.deepEqual(Object.fromEntries([...counts].sort()), { 'big@example.net': 1, 'small1@example.net': 1, 'small2@example.net': 1, 'small3@example.net': 1 });
  const c = (await w.t0.request('GET', `/v1/campaigns/${id}`)).body as { status: string };
  t.is(c.status, 'SENT');
});
