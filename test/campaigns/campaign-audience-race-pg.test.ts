import test from 'ava';
import pg from 'pg';
import { ManualClock } from '../../src/lib/clock.js';
import { createTestDatabase, dropTestDatabase, untilSomeoneWaitsForALock } from '../helpers/pg-databases.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { campaignFixtures } from '../helpers/campaign-fixtures.js';

// PostgreSQL (whatever POSTHORN_TEST_STORE says): a campaign created or scheduled through the
// API while another node's delete of its segment or contact book holds that row and commits in
// the middle of the request. The request waits for that row, then sees the delete: refused
// with a clear 4xx, and no campaign is left needing what is gone.

let url: string;
let w: MailWorld;
let client: pg.Client;
const clock = new ManualClock(Date.UTC(2026, 10, 30, 10, 0, 0));

test.before(async () => {
  url = await createTestDatabase();
  w = await startMailWorld({ clock, overrides: { store: { url }, campaigns: { batchWindowSeconds: 60 } } });
  client = new pg.Client({ connectionString: url });
  await client.connect();
});
test.after.always(async () => {
  await client?.end();
  await w?.close();
  if (url) await dropTestDatabase(url);
});

const { book, campaign, get } = campaignFixtures(() => w, () => ({ name: 'Race', from: `News <news@${w.domain.name}>`, subject: 'Hello', html: '<p>Hi {{unsubscribeUrl}}</p>' }));
const segment = async (bookId: string) => {
  const res = await w.t0.request('POST', '/v1/segments', { body: { name: 'Pro', contactBookId: bookId, filters: { match: 'all', conditions: [{ field: 'properties.plan', op: 'eq', value: 'pro' }] } } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.id as string;
};
const needing = async (bookId: string) =>
  (await client.query(`select id from campaigns where contact_book_id = $1 and deleted_at is null and status in ('SCHEDULED', 'RUNNING', 'PAUSED')`, [bookId])).rows;

/**
 * Runs `request` while another connection, as a delete does, has locked `table`'s row `id`
 * and removes it; that delete commits once the request waits for the row (or has answered:
 * a request that never waits has read the row as it was and wrote on top of the delete).
 */
async function deletedDuring(table: 'segments' | 'contact_books', id: string, request: () => Promise<{ status: number; body: any }>) {
  const deleting = new pg.Client({ connectionString: url });
  await deleting.connect();
  try {
    await deleting.query('begin');
    await deleting.query(`select id from ${table} where id = $1 for update`, [id]);
    if (table === 'contact_books') {
      await deleting.query('delete from contacts where contact_book_id = $1', [id]);
      await deleting.query('delete from segments where contact_book_id = $1', [id]);
    }
    await deleting.query(`delete from ${table} where id = $1`, [id]);
    const answer = request();
    let answered = false;
    void answer.finally(() => (answered = true)).catch(() => undefined);
    await Promise.race([answer.catch(() => undefined), untilSomeoneWaitsForALock(client)]);
    await deleting.query('commit');
    const res = await answer;
    return { res, waited: !answered };
  } finally {
    await deleting.end();
  }
}

test.serial('a campaign created with sendNow while its segment is being deleted waits for the delete and is refused (400), not stored', async (t) => {
  const bookId = await book('Pg seg create', [{ email: 'ps1@example.net', properties: { plan: 'pro' } }]);
  const seg = await segment(bookId);
  const { res } = await deletedDuring('segments', seg, () =>
    w.t0.request('POST', '/v1/campaigns', { body: { name: 'Pg race', from: `News <news@${w.domain.name}>`, subject: 'Hi', html: '<p>Hi</p>', contactBookId: bookId, segmentId: seg, sendNow: true } }),
  );
  t.is(res.status, 400, JSON.stringify(res.body));
  t.is(res.body.error.message, `segmentId: segment ${seg} not found`);
  t.deepEqual(await needing(bookId), []);
});

test.serial('a campaign created with scheduledAt while its contact book is being deleted waits for the delete and is refused (400), not stored', async (t) => {
  const bookId = await book('Pg book create', [{ email: 'pb1@example.net' }]);
  const { res } = await deletedDuring('contact_books', bookId, () =>
    w.t0.request('POST', '/v1/campaigns', {
      body: { name: 'Pg race', from: `News <news@${w.domain.name}>`, subject: 'Hi', html: '<p>Hi</p>', contactBookId: bookId, scheduledAt: new Date(clock.nowMs() + 3_600_000).toISOString() },
    }),
  );
  t.is(res.status, 400, JSON.stringify(res.body));
  t.is(res.body.error.message, `contactBookId: contact book ${bookId} not found`);
  t.deepEqual(await needing(bookId), []);
});

test.serial('a schedule while the segment is being deleted waits for the delete and is refused (400); the campaign stays a draft', async (t) => {
  const bookId = await book('Pg seg schedule', [{ email: 'pss1@example.net', properties: { plan: 'pro' } }]);
  const seg = await segment(bookId);
  const draft = await campaign(bookId, { segmentId: seg });
  const { res } = await deletedDuring('segments', seg, () => w.t0.request('POST', `/v1/campaigns/${draft.id}/schedule`, { body: {} }));
  t.is(res.status, 400, JSON.stringify(res.body));
  t.is(res.body.error.message, `segmentId: segment ${seg} no longer exists`);
  t.is((await get(draft.id)).status, 'DRAFT');
});

test.serial('a contact book delete while a schedule holds the book waits for it and is refused (409 naming the campaign); no contact is deleted', async (t) => {
  const bookId = await book('Pg book delete', [{ email: 'pbd1@example.net' }]);
  const draft = await campaign(bookId, { name: 'Holds the book' });
  const scheduling = new pg.Client({ connectionString: url });
  await scheduling.connect();
  try {
    // As a schedule does (campaigns-repository, update withAudience): the book held, the campaign moved on.
    await scheduling.query('begin');
    await scheduling.query('select id from contact_books where id = $1 for share', [bookId]);
    await scheduling.query(`update campaigns set status = 'SCHEDULED' where id = $1`, [draft.id]);
    const deleting = w.t0.request('DELETE', `/v1/contactBooks/${bookId}`);
    await untilSomeoneWaitsForALock(client);
    await scheduling.query('commit');
    const res = await deleting;
    t.is(res.status, 409, JSON.stringify(res.body));
    t.true(res.body.error.message.startsWith(`contact book ${bookId} is used by campaign ${draft.id} ("Holds the book", SCHEDULED)`), res.body.error.message);
  } finally {
    await scheduling.end();
  }
  const shown = await w.t0.request('GET', `/v1/contactBooks/${bookId}`);
  t.is(shown.body._count.contacts, 1);
  t.is((await get(draft.id)).status, 'SCHEDULED');
});
