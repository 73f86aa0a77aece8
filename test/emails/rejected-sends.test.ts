import test, { type ExecutionContext } from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../webhooks/webhook-receiver.js';

// Accepted mail the service later refuses to send (REJECTED) or cannot render (RENDERING_FAILURE):
// each ends in its status with its event and webhook instead of going out, hanging or retrying.

const clock = new ManualClock(Date.UTC(2026, 10, 22, 8, 0, 0));
const HOUR = 3600_000;
let w: MailWorld;
let receiver: WebhookReceiver;
test.before(async () => {
  w = await startMailWorld({ clock, overrides: { webhooks: { allowPrivate: true }, campaigns: { batchWindowSeconds: 60 } } });
  receiver = await startWebhookReceiver();
  const hook = await w.t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['email.rejected', 'email.rendering_failure'] } });
  if (hook.status !== 200) throw new Error(JSON.stringify(hook.body));
});
test.after.always(async () => {
  await w?.close();
  await receiver?.close();
});

const get = async (id: string) => (await w.t0.request('GET', `/v1/emails/${id}`)).body;
const sentTo = (address: string) => w.sink.messages.filter((m) => m.rcptTo.includes(address)).length;
/** The webhook calls of one email's event, once at least one has arrived (waits for it, no sleeping). */
async function hooksFor(emailId: string, type: string) {
  const of = () => receiver.calls.filter((c) => c.json?.type === type && c.json.data.id === emailId);
  while (of().length === 0) await receiver.waitFor(receiver.calls.length + 1);
  return of();
}

async function send(from: string, to: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: { from, to, subject: 'Hello', text: 'Hi', ...extra } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId;
}

test.serial('a scheduled email whose sending domain lost its verification before its time is REJECTED, not sent from the unverified domain', async (t) => {
  const domain = await addVerifiedDomain(w.t0, 'lapsed.dev');
  const id = await send('news@lapsed.dev', 'lapsed@example.net', { scheduledAt: new Date(clock.nowMs() + HOUR).toISOString() });
  // The DKIM record is taken down and the re-check sees it: the domain is no longer verified.
  const dkim = domain.dnsRecords.find((r: any) => r.type === 'TXT' && r.name.includes('_domainkey'));
  w.zone.remove(dkim.name);
  t.is((await w.t0.request('PUT', `/v1/domains/${domain.id}/verify`)).status, 200);
  t.not((await w.t0.request('GET', `/v1/domains/${domain.id}`)).body.status, 'SUCCESS');
  clock.advance(HOUR + 1000);
  await w.settle();
  t.is(sentTo('lapsed@example.net'), 0, 'nothing goes out from a domain that is not verified');
  const e = await get(id);
  t.is(e.latestStatus, 'REJECTED');
  t.deepEqual(e.emailEvents.map((x: any) => x.status), ['SCHEDULED', 'REJECTED']);
  t.is(e.emailEvents[1].data.recipient, 'lapsed@example.net');
  t.regex(e.emailEvents[1].data.rejected.reason, /lapsed\.dev.*not verified/);
  const hooks = await hooksFor(id, 'email.rejected');
  t.is(hooks.length, 1);
  t.is(hooks[0]!.json.data.recipient, 'lapsed@example.net');
  t.regex(hooks[0]!.json.data.rejected.reason, /not verified/);
  // Closed for good: no retry later.
  clock.advance(6 * HOUR);
  await w.settle();
  t.is(sentTo('lapsed@example.net'), 0);
  t.is((await get(id)).emailEvents.length, 2);
});

test.serial('a queued email whose sending domain was deleted before delivery is REJECTED with the reason', async (t) => {
  const domain = await addVerifiedDomain(w.t0, 'deleted.dev');
  const id = await send('news@deleted.dev', 'deleted@example.net', { scheduledAt: new Date(clock.nowMs() + HOUR).toISOString() });
  t.is((await w.t0.request('DELETE', `/v1/domains/${domain.id}`)).status, 200);
  clock.advance(HOUR + 1000);
  await w.settle();
  t.is(sentTo('deleted@example.net'), 0);
  const e = await get(id);
  t.is(e.latestStatus, 'REJECTED');
  t.deepEqual(e.emailEvents.map((x: any) => x.status), ['SCHEDULED', 'REJECTED']);
  t.regex(e.emailEvents[1].data.rejected.reason, /deleted/);
  const hooks = await hooksFor(id, 'email.rejected');
  t.is(hooks.length, 1);
  t.is(hooks[0]!.json.data.recipient, 'deleted@example.net');
});

test.serial("a campaign contact whose personalised message cannot be written is RENDERING_FAILURE with its event and webhook; the rest of the campaign goes on", async (t) => {
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Render', variables: ['company'] } })).body.id;
  // One contact's value makes the subject a word no mail header can hold (RFC 5322 2.1.1).
  const contacts = [
    { email: 'render0@example.net', properties: { company: 'Acme' } },
    { email: 'render1@example.net', properties: { company: 'X'.repeat(950) } },
    { email: 'render2@example.net', properties: { company: 'Globex' } },
  ];
  t.is((await w.t0.request('POST', `/v1/contactBooks/${book}/contacts/bulk`, { body: contacts })).status, 200);
  const c = (
    await w.t0.request('POST', '/v1/campaigns', {
      body: { name: 'Render', from: `news@${w.domain.name}`, subject: 'News for {{company}}', contactBookId: book, html: '<p>Hi {{company}}</p>', sendNow: true, batchSize: 1 },
    })
  ).body;
  for (let i = 0; i < 5; i++) {
    await w.t0.app.runCampaigns();
    await w.settle();
    clock.advance(60_000);
  }
  const campaign = (await w.t0.request('GET', `/v1/campaigns/${c.id}`)).body;
  t.is(campaign.status, 'SENT', 'one bad contact neither pauses nor stops the campaign');
  t.is(sentTo('render0@example.net'), 1);
  t.is(sentTo('render2@example.net'), 1);
  t.is(sentTo('render1@example.net'), 0);
  const list = (await w.t0.request('GET', '/v1/emails?limit=100')).body.data as any[];
  const failed = list.filter((e) => e.to === 'render1@example.net');
  t.is(failed.length, 1, 'the contact has one email, on record');
  const e = await get(failed[0].id);
  t.is(e.latestStatus, 'RENDERING_FAILURE');
  t.deepEqual(e.emailEvents.map((x: any) => x.status), ['RENDERING_FAILURE']);
  t.is(e.emailEvents[0].data.recipient, 'render1@example.net');
  t.regex(e.emailEvents[0].data.renderingFailure.reason, /subject/);
  const hooks = await hooksFor(e.id, 'email.rendering_failure');
  t.is(hooks.length, 1);
  t.is(hooks[0]!.json.data.recipient, 'render1@example.net');
  t.is(hooks[0]!.json.data.campaignId, c.id);
  // Reached once: later batches do not try the contact again.
  await w.t0.app.runCampaigns();
  await w.settle();
  t.is((await w.t0.request('GET', '/v1/emails?limit=100')).body.data.filter((x: any) => x.to === 'render1@example.net').length, 1);
});

/**
 * The engine claims a delivery and starts its attempt; `meanwhile` changes something a claim
 * acts on, and the lease runs out (the renewal failed, the sweep freed the row); the next claim
 * takes the row again (the engine drops what is in flight from it) and must not close it: the
 * attempt on the wire ends delivered, and that is what the email shows.
 */
async function retakenInFlight(t: ExecutionContext, domainName: string, to: string, meanwhile: (domain: any) => Promise<void>, notStatus: string): Promise<void> {
  await w.t0.app.engine.stop();
  const domain = await addVerifiedDomain(w.t0, domainName);
  const id = await send(`news@${domainName}`, to);
  const svc = w.t0.app.services.deliveries;
  const [group] = (await svc.claim(10)).filter((g) => g.email.id === id);
  t.truthy(group);
  const attempting = new Set(group!.deliveries.map((d) => d.id));
  await meanwhile(domain);
  await w.t0.app.store.db.updateTable('deliveries').set({ lease_owner: null, lease_until: null }).where('id', 'in', [...attempting]).execute();
  await svc.claim(10, [], attempting);
  await svc.complete(group!, new Date(clock.nowMs()), group!.deliveries.map((d) => ({ deliveryId: d.id, outcome: 'delivered' as const, code: 250, response: '250 2.0.0 OK' })));
  const e = await get(id);
  t.is(e.latestStatus, 'DELIVERED');
  t.false(e.emailEvents.some((x: any) => x.status === notStatus));
}

// Last in the file: they stop the engine to play its part by hand.
test.serial('a delivery this node is still attempting is not REJECTED by a claim that took it again (its lease ran out): the attempt records its outcome', async (t) => {
  await retakenInFlight(t, 'inflight.dev', 'inflight@example.net', async (domain) => {
    // The domain loses its verification.
    const dkim = domain.dnsRecords.find((r: any) => r.type === 'TXT' && r.name.includes('_domainkey'));
    w.zone.remove(dkim.name);
    t.is((await w.t0.request('PUT', `/v1/domains/${domain.id}/verify`)).status, 200);
  }, 'REJECTED');
});

test.serial('a delivery this node is still attempting is not SUPPRESSED by a claim that took it again (its lease ran out): the attempt records its outcome', async (t) => {
  await retakenInFlight(t, 'inflight-sup.dev', 'late-suppressed@example.net', async () => {
    t.is((await w.t0.request('POST', '/v1/suppressions', { body: { email: 'late-suppressed@example.net' } })).status, 200);
  }, 'SUPPRESSED');
});
