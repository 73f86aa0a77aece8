import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';

// A campaign keeps whether it was scheduled (started, resumed) in sandbox mode, and its batches
// send as that, whatever the mode of the process that runs them after a restart: real mail is
// never captured and counted DELIVERED, and a trial in sandbox mode never turns into real mail
// to its contacts without the user resuming it on a server without sandbox mode.

const HOUR = 3600_000;

async function bookOf(w: MailWorld, emails: string[]): Promise<string> {
  const b = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Sandbox' } })).body;
  const bulk = await w.t0.request('POST', `/v1/contactBooks/${b.id}/contacts/bulk`, { body: emails.map((email) => ({ email })) });
  if (bulk.status !== 200) throw new Error(JSON.stringify(bulk.body));
  return b.id as string;
}

async function scheduledCampaign(w: MailWorld, clock: ManualClock, bookId: string) {
  const res = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'News', from: `News <news@${w.domain.name}>`, subject: 'Hello', contactBookId: bookId, html: '<p>Hi {{unsubscribeUrl}}</p>', scheduledAt: new Date(clock.nowMs() + HOUR).toISOString() },
  });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body as { id: string };
}

const campaignOf = async (w: MailWorld, id: string) => (await w.t0.request('GET', `/v1/campaigns/${id}`)).body;

/** Runs the campaign's due batches until it is SENT or PAUSED (the app's own runner may have one under way); returns which. */
async function runBatches(w: MailWorld, id: string): Promise<string> {
  let status: string;
  while ((status = (await campaignOf(w, id)).status) !== 'SENT' && status !== 'PAUSED') await w.t0.app.runCampaigns();
  await w.settle();
  return status;
}

const emailsOf = async (w: MailWorld, campaignId: string) =>
  Promise.all(
    (await w.t0.app.store.db.selectFrom('emails').select('id').where('campaign_id', '=', campaignId).execute()).map(async (e) => (await w.t0.request('GET', `/v1/emails/${e.id}`)).body),
  );

test('a campaign scheduled outside sandbox mode whose batch runs in it: nothing captured, its mail held, and sent to its contacts once sandbox mode is off', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 8, 0, 0));
  const w = await startMailWorld({ clock });
  try {
    const c = await scheduledCampaign(w, clock, await bookOf(w, ['ann@example.net', 'bob@example.net']));
    await w.restart({ sandbox: true });
    clock.advance(HOUR + 1000);
    t.is(await runBatches(w, c.id), 'SENT');
    const held = await emailsOf(w, c.id);
    t.is(held.length, 2);
    for (const e of held) {
      t.is(e.latestStatus, 'DELIVERY_DELAYED', JSON.stringify(e.emailEvents));
      t.false(e.emailEvents.some((x: any) => x.status === 'DELIVERED' || x.status === 'SENT'));
      t.regex(e.emailEvents.at(-1).data.response, /^451 4\.3\.2 held: accepted outside sandbox mode/);
    }
    t.is((await w.t0.request('GET', '/v1/sandbox/messages')).body.total, 0, 'nothing captured');
    t.is((await campaignOf(w, c.id)).delivered, 0);
    t.is(w.sink.messages.length, 0);

    await w.restart({ sandbox: false });
    clock.advance(HOUR);
    await w.settle();
    t.deepEqual(w.sink.messages.flatMap((m) => m.rcptTo).sort(), ['ann@example.net', 'bob@example.net']);
    for (const e of await emailsOf(w, c.id)) {
      t.is(e.latestStatus, 'DELIVERED');
      t.not(e.emailEvents.at(-1).data.mxHost, 'sandbox');
    }
    t.is((await campaignOf(w, c.id)).delivered, 2);
  } finally {
    await w.close();
  }
});

test('a campaign scheduled in sandbox mode whose batch falls due outside it is paused, none of its contacts mailed; resumed there, it sends to them for real', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 8, 0, 0));
  const w = await startMailWorld({ clock, overrides: { sandbox: true } });
  try {
    const c = await scheduledCampaign(w, clock, await bookOf(w, ['cat@example.net', 'dan@example.net']));
    await w.restart({ sandbox: false });
    clock.advance(HOUR + 1000);
    t.is(await runBatches(w, c.id), 'PAUSED');
    t.is((await emailsOf(w, c.id)).length, 0, 'no email made from a trial');
    t.is(w.sink.messages.length, 0);
    t.is((await campaignOf(w, c.id)).total, 2, 'started: its audience is fixed');

    // Resuming on a server without sandbox mode is the user's say that it is real mail.
    t.is((await w.t0.request('POST', `/v1/campaigns/${c.id}/resume`)).status, 200);
    t.is(await runBatches(w, c.id), 'SENT');
    t.deepEqual(w.sink.messages.flatMap((m) => m.rcptTo).sort(), ['cat@example.net', 'dan@example.net']);
    t.is((await campaignOf(w, c.id)).delivered, 2);
  } finally {
    await w.close();
  }
});

test('a campaign scheduled and run in sandbox mode is captured, as before', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 8, 0, 0));
  const w = await startMailWorld({ clock, overrides: { sandbox: true } });
  try {
    const c = await scheduledCampaign(w, clock, await bookOf(w, ['eve@example.net']));
    clock.advance(HOUR + 1000);
    t.is(await runBatches(w, c.id), 'SENT');
    t.is((await w.t0.request('GET', '/v1/sandbox/messages')).body.total, 1, 'a campaign scheduled in sandbox mode is captured in it');
    const [e] = await emailsOf(w, c.id);
    t.is(e.latestStatus, 'DELIVERED');
    t.is(e.emailEvents.at(-1).data.mxHost, 'sandbox');
    t.is(w.sink.messages.length, 0);
  } finally {
    await w.close();
  }
});

test('a campaign resumed in sandbox mode sends its rest as sandbox mail (captured); an older campaign without the mark sends as the running process', async (t) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 8, 0, 0));
  const w = await startMailWorld({ clock });
  try {
    const res = await w.t0.request('POST', '/v1/campaigns', {
      body: { name: 'Two', from: `News <news@${w.domain.name}>`, subject: 'Hello', contactBookId: await bookOf(w, ['fay@example.net', 'gus@example.net']), html: '<p>Hi {{unsubscribeUrl}}</p>', sendNow: true, batchSize: 1 },
    });
    t.is(res.status, 200, JSON.stringify(res.body));
    const id = res.body.id as string;
    while ((await emailsOf(w, id)).length < 1) await w.t0.app.runCampaigns();
    await w.settle();
    t.is(w.sink.messages.length, 1, 'the first batch is real mail');
    t.is((await w.t0.request('POST', `/v1/campaigns/${id}/pause`)).status, 200);
    await w.restart({ sandbox: true });
    t.is((await w.t0.request('POST', `/v1/campaigns/${id}/resume`)).status, 200);
    // One contact a batch, a batch a window: the last batch finds nobody left and marks it SENT.
    while ((await campaignOf(w, id)).status === 'RUNNING') {
      clock.advance(60_000);
      await w.t0.app.runCampaigns();
    }
    await w.settle();
    t.is((await campaignOf(w, id)).status, 'SENT');
    t.is(w.sink.messages.length, 1, 'the rest is not sent for real');
    t.is((await w.t0.request('GET', '/v1/sandbox/messages')).body.total, 1, 'the rest is captured');
    t.is((await campaignOf(w, id)).delivered, 2);

    // A campaign from before the mark was kept (null): captured by a server in sandbox mode, as before.
    const old = await scheduledCampaign(w, clock, await bookOf(w, ['hal@example.net']));
    await w.t0.app.store.db.updateTable('campaigns').set({ accepted_in_sandbox: null }).where('id', '=', old.id).execute();
    clock.advance(HOUR + 1000);
    t.is(await runBatches(w, old.id), 'SENT');
    t.is((await w.t0.request('GET', '/v1/sandbox/messages')).body.total, 2);
  } finally {
    await w.close();
  }
});
