import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { campaignFixtures } from '../helpers/campaign-fixtures.js';
import { twoTeams } from '../helpers/two-teams.js';

// A campaign whose segment or contact book is deleted: never sent to nobody in silence. Deleting
// what a campaign still needs is refused (409, naming it); a draft left pointing at a deleted one
// shows it and is refused when scheduled; one that slipped through is paused, saying why.

const clock = new ManualClock(Date.UTC(2026, 10, 22, 10, 0, 0));
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock, overrides: { campaigns: { batchWindowSeconds: 60 } } });
});
test.after.always(async () => {
  await w?.close();
});

const { book, campaign, get, run } = campaignFixtures(() => w, () => ({ name: 'Gone', from: `News <news@${w.domain.name}>`, subject: 'Hello', html: '<p>Hi {{unsubscribeUrl}}</p>' }));
const sentTo = (prefix: string) => w.sink.messages.flatMap((m) => m.rcptTo).filter((r) => r.startsWith(prefix));
const inAnHour = () => new Date(clock.nowMs() + 3_600_000).toISOString();
const segment = async (bookId: string) => {
  const res = await w.t0.request('POST', '/v1/segments', { body: { name: 'Pro', contactBookId: bookId, filters: { match: 'all', conditions: [{ field: 'properties.plan', op: 'eq', value: 'pro' }] } } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.id as string;
};
const del = (path: string) => w.t0.request('DELETE', path);

test.serial('a segment a campaign not yet started uses is not deleted (409 naming the campaign); once none needs it, it is', async (t) => {
  const bookId = await book('Seg in use', [{ email: 'siu1@example.net', properties: { plan: 'pro' } }]);
  const seg = await segment(bookId);
  const draft = await campaign(bookId, { name: 'Draft one', segmentId: seg });
  const scheduled = await campaign(bookId, { name: 'Spring "sale"', segmentId: seg, scheduledAt: inAnHour() });
  const refused = await del(`/v1/segments/${seg}`);
  t.is(refused.status, 409);
  t.is(refused.body.error.code, 'NOT_UNIQUE');
  t.true(refused.body.error.message.startsWith(`segment ${seg} is used by campaign ${scheduled.id} ("Spring \\"sale\\"", SCHEDULED), not started yet`), refused.body.error.message);
  t.false(refused.body.error.message.includes(draft.id), 'a draft does not hold the segment');
  t.is((await w.t0.request('GET', `/v1/segments/${seg}`)).status, 200, 'nothing deleted');
  t.is((await del(`/v1/campaigns/${scheduled.id}`)).status, 200);
  t.is((await del(`/v1/segments/${seg}`)).status, 200);
  // The draft shows the segment it points at; scheduling it says the segment is gone.
  const shown = await get(draft.id);
  t.is(shown.segmentId, seg);
  t.is(shown.status, 'DRAFT');
  const sched = await w.t0.request('POST', `/v1/campaigns/${draft.id}/schedule`, { body: {} });
  t.is(sched.status, 400);
  t.is(sched.body.error.message, `segmentId: segment ${seg} no longer exists`);
  t.is((await get(draft.id)).status, 'DRAFT');
  // Another segment (or none) and it goes.
  t.is((await w.t0.request('PATCH', `/v1/campaigns/${draft.id}`, { body: { segmentId: null } })).status, 200);
  t.true((await w.t0.request('POST', `/v1/campaigns/${draft.id}/schedule`, { body: {} })).body.success);
  await run();
  t.deepEqual(sentTo('siu'), ['siu1@example.net']);
});

test.serial("another team's campaign never holds a team's segment, nor is it named", async (t) => {
  const { b } = await twoTeams(w.t0);
  const bookId = await book('Seg tenant', [{ email: 'stn1@example.net', properties: { plan: 'pro' } }]);
  const seg = await segment(bookId);
  const c = await campaign(bookId, { segmentId: seg, scheduledAt: inAnHour() });
  // A row of team B that names team A's segment id (the API never lets it; the store would have to).
  await w.t0.app.store.db.updateTable('campaigns').set({ team_id: b.teamId }).where('id', '=', c.id).execute();
  const res = await del(`/v1/segments/${seg}`);
  t.is(res.status, 200, JSON.stringify(res.body));
});

test.serial('a segment a started campaign used can be deleted: the campaign keeps its filter', async (t) => {
  const bookId = await book('Seg started', [{ email: 'sst1@example.net', properties: { plan: 'pro' } }, { email: 'sst2@example.net', properties: { plan: 'pro' } }]);
  const seg = await segment(bookId);
  const c = await campaign(bookId, { segmentId: seg, sendNow: true, batchSize: 1 });
  await run();
  t.is((await get(c.id)).status, 'RUNNING');
  t.is((await del(`/v1/segments/${seg}`)).status, 200);
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/pause`)).status, 200);
  t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`)).status, 200, 'a started campaign resumes without its segment');
  clock.advance(60_000);
  await run();
  t.is(sentTo('sst').length, 2);
});

test.serial('a scheduled campaign whose segment went anyway (a delete racing the schedule) is paused, not sent to nobody; resume says why', async (t) => {
  const bookId = await book('Seg raced', [{ email: 'srd1@example.net', properties: { plan: 'pro' } }]);
  const seg = await segment(bookId);
  const c = await campaign(bookId, { segmentId: seg, sendNow: true });
  // The store as a delete that raced the schedule would leave it.
  await w.t0.app.store.db.deleteFrom('segments').where('id', '=', seg).execute();
  await run();
  const paused = await get(c.id);
  t.is(paused.status, 'PAUSED');
  t.is(paused.total, 0);
  t.deepEqual(sentTo('srd'), []);
  const resumed = await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`);
  t.is(resumed.status, 400);
  t.is(resumed.body.error.message, `segmentId: segment ${seg} no longer exists`);
});

test.serial('a paused campaign that never started resumes as scheduled once its audience is back, and counts it at the start', async (t) => {
  const bookId = await book('Seg back', [{ email: 'sbk1@example.net', properties: { plan: 'pro' } }]);
  const seg = await segment(bookId);
  // Scheduled ahead, so the runner cannot start it (and copy the filter) before the delete lands.
  const c = await campaign(bookId, { segmentId: seg, scheduledAt: inAnHour() });
  const row = await w.t0.app.store.db.selectFrom('segments').selectAll().where('id', '=', seg).executeTakeFirstOrThrow();
  await w.t0.app.store.db.deleteFrom('segments').where('id', '=', seg).execute();
  clock.advance(3_600_000);
  await run();
  t.is((await get(c.id)).status, 'PAUSED');
  await w.t0.app.store.db.insertInto('segments').values(row).execute();
  const resumed = await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`);
  t.is(resumed.status, 200);
  t.is(resumed.body.campaign.status, 'SCHEDULED');
  await run();
  const done = await get(c.id);
  t.is(done.status, 'SENT');
  t.is(done.total, 1);
  t.is(done.sent, 1);
  t.deepEqual(sentTo('sbk'), ['sbk1@example.net']);
});

test.serial('contact books alike: one a scheduled, running or paused campaign sends to is not deleted (409); a draft on a deleted book shows it and is not scheduled', async (t) => {
  const bookId = await book('Book in use', [{ email: 'biu1@example.net' }]);
  const draft = await campaign(bookId, { name: 'Book draft' });
  const scheduled = await campaign(bookId, { name: 'Book scheduled', scheduledAt: inAnHour() });
  const refused = await del(`/v1/contactBooks/${bookId}`);
  t.is(refused.status, 409);
  t.is(refused.body.error.code, 'NOT_UNIQUE');
  t.true(refused.body.error.message.startsWith(`contact book ${bookId} is used by campaign ${scheduled.id} ("Book scheduled", SCHEDULED)`), refused.body.error.message);
  t.false(refused.body.error.message.includes(draft.id));
  t.is((await w.t0.request('GET', `/v1/contactBooks/${bookId}`)).body._count.contacts, 1, 'no contact deleted');
  t.is((await del(`/v1/campaigns/${scheduled.id}`)).status, 200);
  t.is((await del(`/v1/contactBooks/${bookId}`)).status, 200);
  const shown = await get(draft.id);
  t.is(shown.contactBookId, bookId);
  const sched = await w.t0.request('POST', `/v1/campaigns/${draft.id}/schedule`, { body: {} });
  t.is(sched.status, 400);
  t.is(sched.body.error.message, `contactBookId: contact book ${bookId} no longer exists`);
  t.is((await get(draft.id)).status, 'DRAFT');
});
