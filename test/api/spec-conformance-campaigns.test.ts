import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';

// Probes of the spec's Campaigns endpoints table: POST /v1/campaigns requires name, from,
// subject and contactBookId; previewText, content and html are optional.

let w: MailWorld;
test.before(async () => {
  w = await startMailWorld();
});
test.after.always(async () => {
  await w?.close();
});

async function bookId(): Promise<string> {
  return (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Spec campaigns' } })).body.id;
}

test('Campaigns, create: a draft needs only name, from, subject and contactBookId; its body comes later, and scheduling needs one', async (t) => {
  const required = { name: 'No body yet', from: `news@${w.domain.name}`, subject: 'Soon', contactBookId: await bookId() };
  const created = await w.t0.request('POST', '/v1/campaigns', { body: required });
  t.is(created.status, 200, JSON.stringify(created.body));
  t.is(created.body.status, 'DRAFT');
  t.is(created.body.content, null);
  t.is(created.body.html, null);
  const id = created.body.id as string;
  t.is((await w.t0.request('GET', `/v1/campaigns/${id}`)).body.html, null);

  // A bodiless draft takes edits that leave it bodiless, and refuses to be scheduled.
  const preview = await w.t0.request('PATCH', `/v1/campaigns/${id}`, { body: { previewText: 'Coming up' } });
  t.is(preview.status, 200, JSON.stringify(preview.body));
  t.is(preview.body.previewText, 'Coming up');
  t.is(preview.body.html, null);
  const early = await w.t0.request('POST', `/v1/campaigns/${id}/schedule`, { body: { scheduledAt: 'in 1 hour' } });
  t.is(early.status, 400);
  t.is(early.body.error.code, 'BAD_REQUEST');
  t.regex(early.body.error.message, /content or html is required/);
  t.is((await w.t0.request('GET', `/v1/campaigns/${id}`)).body.status, 'DRAFT');

  // With a body it schedules.
  const bodied = await w.t0.request('PATCH', `/v1/campaigns/${id}`, { body: { html: '<p>Now with a body</p>' } });
  t.is(bodied.status, 200);
  t.regex(bodied.body.html, /Now with a body/);
  const scheduled = await w.t0.request('POST', `/v1/campaigns/${id}/schedule`, { body: { scheduledAt: 'in 1 hour' } });
  t.is(scheduled.status, 200, JSON.stringify(scheduled.body));
  t.is(scheduled.body.campaign.status, 'SCHEDULED');
});

test('Campaigns, create: sendNow or scheduledAt without a body is 400 BAD_REQUEST and writes nothing', async (t) => {
  const required = { name: 'Hasty', from: `news@${w.domain.name}`, subject: 'Now', contactBookId: await bookId() };
  for (const when of [{ sendNow: true }, { scheduledAt: 'in 2 hours' }]) {
    const res = await w.t0.request('POST', '/v1/campaigns', { body: { ...required, ...when } });
    t.is(res.status, 400, JSON.stringify(when));
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, /content or html is required/);
  }
  const listed = await w.t0.request('GET', '/v1/campaigns?search=Hasty');
  t.is(listed.body.total, 0);
});
