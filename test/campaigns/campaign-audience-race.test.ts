import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { AppError } from '../../src/core/errors.js';
import { createCampaignService } from '../../src/core/campaigns/campaign-service.js';
import { createCampaignsRepository } from '../../src/store/repositories/campaigns-repository.js';
import { createContactBooksRepository } from '../../src/store/repositories/contact-books-repository.js';
import { createSegmentsRepository } from '../../src/store/repositories/segments-repository.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { campaignFixtures } from '../helpers/campaign-fixtures.js';

// A campaign and the audience it needs, written at the same time (either store): whichever
// commits first wins and the other is refused with a clear 4xx, never a campaign left needing a
// contact book or segment that is gone (or whose contacts are). The interleavings are driven
// by hooks at the exact point between one side's check and its write.

const clock = new ManualClock(Date.UTC(2026, 10, 30, 10, 0, 0));
let w: MailWorld;
test.before(async () => {
  w = await startMailWorld({ clock, overrides: { campaigns: { batchWindowSeconds: 60 } } });
});
test.after.always(async () => {
  await w?.close();
});

const { book, campaign, get } = campaignFixtures(() => w, () => ({ name: 'Race', from: `News <news@${w.domain.name}>`, subject: 'Hello', html: '<p>Hi {{unsubscribeUrl}}</p>' }));
const segment = async (bookId: string) => {
  const res = await w.t0.request('POST', '/v1/segments', { body: { name: 'Pro', contactBookId: bookId, filters: { match: 'all', conditions: [{ field: 'properties.plan', op: 'eq', value: 'pro' }] } } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.id as string;
};
/** Live campaigns that still need the book (what a refused delete would name). */
const needing = async (bookId: string) =>
  w.t0.app.store.db.selectFrom('campaigns').select(['id', 'status']).where('contact_book_id', '=', bookId).where('deleted_at', 'is', null).where('status', 'in', ['SCHEDULED', 'RUNNING', 'PAUSED']).execute();

/**
 * Deletes the book through the API, running `during` once the delete has checked that no
 * campaign needs it and before its contacts go (contact-book-service: remove).
 */
async function deleteBookWith<T>(bookId: string, during: () => Promise<T>) {
  const contacts = w.t0.app.services.contacts;
  const original = contacts.deleteAllInBook;
  let meanwhile: T | undefined;
  contacts.deleteAllInBook = async (teamId: number, id: string) => {
    contacts.deleteAllInBook = original;
    meanwhile = await during();
    return original(teamId, id);
  };
  try {
    const deleted = await w.t0.request('DELETE', `/v1/contactBooks/${bookId}`);
    return { deleted, meanwhile: meanwhile! };
  } finally {
    contacts.deleteAllInBook = original;
  }
}

test.serial('a schedule made while a contact book is being deleted is refused (409): the delete wins, the campaign stays a draft', async (t) => {
  const bookId = await book('Race schedule', [{ email: 'rs1@example.net' }, { email: 'rs2@example.net' }]);
  const draft = await campaign(bookId, { name: 'Race draft' });
  const { deleted, meanwhile } = await deleteBookWith(bookId, () => w.t0.request('POST', `/v1/campaigns/${draft.id}/schedule`, { body: {} }));
  t.is(deleted.status, 200, JSON.stringify(deleted.body));
  t.is(meanwhile.status, 409, JSON.stringify(meanwhile.body));
  t.is(meanwhile.body.error.code, 'NOT_UNIQUE');
  t.is(meanwhile.body.error.message, `contactBookId: contact book ${bookId} is being deleted`);
  t.is((await get(draft.id)).status, 'DRAFT');
  t.deepEqual(await needing(bookId), []);
  t.is((await w.t0.request('GET', `/v1/contactBooks/${bookId}`)).status, 404);
});

test.serial('a campaign created to send (sendNow or scheduledAt) while its contact book is being deleted is refused (409) and not stored', async (t) => {
  for (const when of [{ sendNow: true }, { scheduledAt: new Date(clock.nowMs() + 3_600_000).toISOString() }, { sendNow: true, segment: true }]) {
    const bookId = await book('Race create', [{ email: 'rc1@example.net', properties: { plan: 'pro' } }]);
    const segmentId = when.segment ? await segment(bookId) : undefined;
    const { segment: _, ...body } = when;
    const { deleted, meanwhile } = await deleteBookWith(bookId, () =>
      w.t0.request('POST', '/v1/campaigns', { body: { name: 'Race created', from: `News <news@${w.domain.name}>`, subject: 'Hi', html: '<p>Hi</p>', contactBookId: bookId, segmentId, ...body } }),
    );
    t.is(deleted.status, 200, JSON.stringify(deleted.body));
    t.is(meanwhile.status, 409, JSON.stringify(meanwhile.body));
    t.is(meanwhile.body.error.message, `contactBookId: contact book ${bookId} is being deleted`);
    t.deepEqual(await needing(bookId), []);
  }
});

test.serial('a draft may still be created on a book being deleted (a draft needs nothing until it is scheduled)', async (t) => {
  const bookId = await book('Race draft create', [{ email: 'rd1@example.net' }]);
  const { deleted, meanwhile } = await deleteBookWith(bookId, () =>
    w.t0.request('POST', '/v1/campaigns', { body: { name: 'Draft', from: `News <news@${w.domain.name}>`, subject: 'Hi', contactBookId: bookId } }),
  );
  t.is(deleted.status, 200);
  t.is(meanwhile.status, 200, JSON.stringify(meanwhile.body));
  t.is(meanwhile.body.status, 'DRAFT');
});

test.serial('a contact book whose delete failed half-way can be deleted again, and until then nothing is scheduled on it', async (t) => {
  const bookId = await book('Race failed delete', [{ email: 'rf1@example.net' }]);
  const draft = await campaign(bookId, { name: 'Waits' });
  const contacts = w.t0.app.services.contacts;
  const original = contacts.deleteAllInBook;
  contacts.deleteAllInBook = async () => {
    throw new Error('the store went away');
  };
  try {
    t.not((await w.t0.request('DELETE', `/v1/contactBooks/${bookId}`)).status, 200);
  } finally {
    contacts.deleteAllInBook = original;
  }
  const sched = await w.t0.request('POST', `/v1/campaigns/${draft.id}/schedule`, { body: {} });
  t.is(sched.status, 409);
  t.is(sched.body.error.message, `contactBookId: contact book ${bookId} is being deleted`);
  t.is((await w.t0.request('DELETE', `/v1/contactBooks/${bookId}`)).status, 200);
});

/**
 * A campaign service over the app's store whose read of a segment lets `during` run right
 * after it: what another request that commits between create's check and its insert does.
 */
function serviceReadingSegmentThen(during: (segmentId: string) => Promise<void>) {
  const app = w.t0.app;
  const segments = createSegmentsRepository(app.store.db);
  const findById = segments.findById;
  let once = true;
  segments.findById = async (teamId, id) => {
    const row = await findById(teamId, id);
    if (once) {
      once = false;
      await during(id);
    }
    return row;
  };
  return createCampaignService({
    campaigns: createCampaignsRepository(app.store.db),
    contactBooks: createContactBooksRepository(app.store.db),
    segments,
    contacts: app.services.contacts,
    emails: app.services.emails,
    domains: app.services.domains,
    events: app.services.events,
    clock,
    logger: app.logger,
    secret: app.secret,
    publicUrl: app.config.publicUrl,
    hostname: app.config.hostname,
    batchWindowMs: 60_000,
    owner: 'race-test',
  });
}

test.serial('a segment deleted between the check of a campaign created to send and its insert: the create is refused (400), no campaign needs a missing segment', async (t) => {
  const bookId = await book('Race segment', [{ email: 'rg1@example.net', properties: { plan: 'pro' } }]);
  const seg = await segment(bookId);
  let deletedStatus = 0;
  const service = serviceReadingSegmentThen(async (id) => {
    deletedStatus = (await w.t0.request('DELETE', `/v1/segments/${id}`)).status;
  });
  const err = await t.throwsAsync(
    service.create({ teamId: w.t0.teamId, domainId: null }, { name: 'Seg race', from: `News <news@${w.domain.name}>`, subject: 'Hi', html: '<p>Hi</p>', contactBookId: bookId, segmentId: seg, sendNow: true }),
  );
  t.is(deletedStatus, 200, 'the delete came first: no campaign needed the segment yet');
  t.true(err instanceof AppError, String(err));
  t.is((err as AppError).code, 'BAD_REQUEST');
  t.is(err!.message, `segmentId: segment ${seg} not found`);
  t.deepEqual(await needing(bookId), []);
});
