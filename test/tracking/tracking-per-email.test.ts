import test from 'ava';
import { simpleParser } from 'mailparser';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import type { SinkMessage } from '../helpers/smtp-sink.js';
import { submissionTransport } from '../helpers/submission-client.js';
import { ConsoleClient, consoleUser } from '../console/helpers/console-client.js';

// Open and click tracking per email and per campaign: `openTracking` / `clickTracking` on a
// send (API, batch, campaign, SMTP submission header) override the domain's switches for that
// email; absent, the domain decides at send time. Checked on the message as the MX received it.

const clock = new ManualClock(Date.UTC(2026, 10, 27, 9, 0, 0));
let w: MailWorld;

test.before(async () => {
  w = await startMailWorld({ clock });
});
test.after.always(async () => {
  await w?.close();
});

const HTML = '<html><body><p>Hello</p><a href="https://example.com/reset?t=1">Reset</a></body></html>';
const ORIGINAL = 'https://example.com/reset?t=1';

const hrefs = (html: string) => [...html.matchAll(/<a\b[^>]*\shref="([^"]*)"/g)].map((m) => m[1]!.replace(/&amp;/g, '&'));
const pixel = (html: string) => /<img src="([^"]*\/t\/o\/[^"]*)"/.exec(html)?.[1];

async function setDomain(openTracking: boolean, clickTracking: boolean) {
  const res = await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { openTracking, clickTracking } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
}

const subjectOf = (m: SinkMessage) => /^Subject: (.*)\r?$/m.exec(m.raw.toString('latin1'))?.[1];

/** The first message the sink received with this subject, waited for. */
async function received(subject: string): Promise<SinkMessage> {
  w.t0.app.engine.wake();
  for (;;) {
    const found = w.sink.messages.find((m) => subjectOf(m) === subject);
    if (found) return found;
    await w.sink.waitForMessages(w.sink.messages.length + 1);
  }
}

/** The HTML of the message with this subject, as received. */
async function deliveredHtml(subject: string): Promise<string> {
  return String((await simpleParser((await received(subject)).raw)).html || '');
}

const getEmail = async (id: string) => (await w.t0.request('GET', `/v1/emails/${id}`)).body;

async function send(extra: Record<string, unknown>, prefix: '/v1' | '/api/v1' = '/v1'): Promise<string> {
  const res = await w.t0.request('POST', `${prefix}/emails`, { body: sendBody(w, { html: HTML, text: undefined, ...extra }) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId;
}

test.serial('a domain tracking both + an email with both off: delivered with its original links and no pixel; GET shows the override', async (t) => {
  await setDomain(true, true);
  const off = await send({ subject: 'reset-off', openTracking: false, clickTracking: false });
  const html = await deliveredHtml('reset-off');
  t.deepEqual(hrefs(html), [ORIGINAL]);
  t.is(pixel(html), undefined);
  t.like(await getEmail(off), { openTracking: false, clickTracking: false });

  // Absent: the domain decides, and GET says so with null.
  const plain = await send({ subject: 'reset-default' });
  const tracked = await deliveredHtml('reset-default');
  t.regex(hrefs(tracked)[0]!, /\/t\/c\//);
  t.truthy(pixel(tracked));
  t.like(await getEmail(plain), { openTracking: null, clickTracking: null });

  // One off, the other left to the domain (through the usesend-compatible route).
  await send({ subject: 'reset-clicks-off', clickTracking: false }, '/api/v1');
  const half = await deliveredHtml('reset-clicks-off');
  t.deepEqual(hrefs(half), [ORIGINAL]);
  t.truthy(pixel(half), 'the open pixel follows the domain');
});

test.serial('a domain tracking nothing + an email with tracking on: the pixel and tracked links, which work', async (t) => {
  await setDomain(false, false);
  const id = await send({ subject: 'welcome-on', openTracking: true, clickTracking: true });
  const html = await deliveredHtml('welcome-on');
  const px = pixel(html)!;
  t.regex(px, /^http:\/\/posthorn\.test\/t\/o\/em_/, 'the same host the domain switch would use');
  const link = hrefs(html)[0]!;
  t.regex(link, /^http:\/\/posthorn\.test\/t\/c\//);
  const opened = await fetch(`http://127.0.0.1:${w.t0.app.listeners.http!.port}${new URL(px).pathname}`);
  t.is(opened.status, 200);
  const clicked = await fetch(`http://127.0.0.1:${w.t0.app.listeners.http!.port}${new URL(link).pathname}`, { redirect: 'manual' });
  t.is(clicked.status, 302);
  t.is(clicked.headers.get('location'), ORIGINAL);
  const email = await getEmail(id);
  t.like(email, { openTracking: true, clickTracking: true });
  t.deepEqual(email.emailEvents.map((e: any) => e.status).filter((s: string) => s === 'OPENED' || s === 'CLICKED'), ['OPENED', 'CLICKED']);

  // Only opens on: no link is rewritten.
  await send({ subject: 'welcome-opens', openTracking: true });
  const opens = await deliveredHtml('welcome-opens');
  t.truthy(pixel(opens));
  t.deepEqual(hrefs(opens), [ORIGINAL]);

  // Absent: nothing, as the domain says.
  await send({ subject: 'welcome-default' });
  const none = await deliveredHtml('welcome-default');
  t.is(pixel(none), undefined);
  t.deepEqual(hrefs(none), [ORIGINAL]);
});

test.serial('batch items carry their own settings', async (t) => {
  await setDomain(true, true);
  const res = await w.t0.request('POST', '/v1/emails/batch', {
    body: [
      sendBody(w, { html: HTML, subject: 'batch-0', clickTracking: false }),
      sendBody(w, { html: HTML, subject: 'batch-1' }),
      sendBody(w, { html: HTML, subject: 'batch-2', openTracking: false, clickTracking: true }),
    ],
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  const [b0, b1, b2] = [await deliveredHtml('batch-0'), await deliveredHtml('batch-1'), await deliveredHtml('batch-2')];
  t.deepEqual(hrefs(b0), [ORIGINAL]);
  t.truthy(pixel(b0));
  t.regex(hrefs(b1)[0]!, /\/t\/c\//);
  t.truthy(pixel(b1));
  t.regex(hrefs(b2)[0]!, /\/t\/c\//);
  t.is(pixel(b2), undefined);
  const ids = res.body.data.map((d: { emailId: string }) => d.emailId);
  t.like(await getEmail(ids[0]), { openTracking: null, clickTracking: false });
  t.like(await getEmail(ids[1]), { openTracking: null, clickTracking: null });
  t.like(await getEmail(ids[2]), { openTracking: false, clickTracking: true });
});

test.serial('a value that is not a boolean is 400 naming the field', async (t) => {
  for (const prefix of ['/v1', '/api/v1']) {
    const one = await w.t0.request('POST', `${prefix}/emails`, { body: sendBody(w, { openTracking: 'no' }) });
    t.is(one.status, 400);
    t.is(one.body.error.code, 'BAD_REQUEST');
    t.regex(one.body.error.message, /^openTracking: /);
  }
  // null is "not chosen", as for the campaign's fields and the SDK's optional ones: the domain decides.
  const nullValue = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { clickTracking: null, openTracking: null }) });
  t.is(nullValue.status, 200);
  t.like((await w.t0.request('GET', `/v1/emails/${nullValue.body.emailId}`)).body, { clickTracking: null, openTracking: null });
  const batch = await w.t0.request('POST', '/v1/emails/batch', { body: [sendBody(w), sendBody(w, { clickTracking: 0 })] });
  t.is(batch.status, 400);
  t.regex(batch.body.error.message, /^\[1\]\.clickTracking: /);
  const campaign = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'Bad', from: `News <news@${w.domain.name}>`, subject: 'x', contactBookId: 'cb_x', html: '<p>x</p>', openTracking: 'off' },
  });
  t.is(campaign.status, 400);
  t.regex(campaign.body.error.message, /^openTracking: /);
});

test.serial('a scheduled email keeps its override until it is sent, also when rescheduled', async (t) => {
  await setDomain(true, true);
  const id = await send({ subject: 'scheduled-off', clickTracking: false, openTracking: false, scheduledAt: new Date(clock.nowMs() + 3600_000).toISOString() });
  const patched = await w.t0.request('PATCH', `/v1/emails/${id}`, { body: { scheduledAt: new Date(clock.nowMs() + 7200_000).toISOString() } });
  t.is(patched.status, 200);
  t.like(await getEmail(id), { latestStatus: 'SCHEDULED', openTracking: false, clickTracking: false });
  clock.advance(7200_000 + 1000);
  const html = await deliveredHtml('scheduled-off');
  t.deepEqual(hrefs(html), [ORIGINAL]);
  t.is(pixel(html), undefined);
});

test.serial('a campaign with click tracking off sends its emails without rewritten links; the setting is on the campaign and its emails', async (t) => {
  await setDomain(true, true);
  const book = (await w.t0.request('POST', '/v1/contactBooks', { body: { name: 'Tracking' } })).body;
  t.is((await w.t0.request('POST', `/v1/contactBooks/${book.id}/contacts/bulk`, { body: [{ email: 'camp1@example.net' }, { email: 'camp2@example.net' }] })).status, 200);
  const created = await w.t0.request('POST', '/v1/campaigns', {
    body: { name: 'No clicks', from: `News <news@${w.domain.name}>`, subject: 'campaign-noclick', contactBookId: book.id, html: '<p>Hi <a href="https://example.com/offer">Offer</a> {{unsubscribeUrl}}</p>', clickTracking: false },
  });
  t.is(created.status, 200, JSON.stringify(created.body));
  t.like(created.body, { clickTracking: false, openTracking: null });
  // A draft's settings can be changed, and back to the domain's with null.
  const patched = await w.t0.request('PATCH', `/v1/campaigns/${created.body.id}`, { body: { openTracking: false } });
  t.is(patched.status, 200, JSON.stringify(patched.body));
  t.like(patched.body, { clickTracking: false, openTracking: false });
  const reset = await w.t0.request('PATCH', `/v1/campaigns/${created.body.id}`, { body: { openTracking: null } });
  t.like(reset.body, { clickTracking: false, openTracking: null });
  t.like((await w.t0.request('GET', `/v1/campaigns/${created.body.id}`)).body, { clickTracking: false, openTracking: null });

  t.is((await w.t0.request('POST', `/v1/campaigns/${created.body.id}/schedule`, { body: {} })).status, 200);
  await w.t0.app.runCampaigns();
  await w.settle();
  const first = await received('campaign-noclick');
  await w.settle();
  const messages = w.sink.messages.filter((m) => subjectOf(m) === 'campaign-noclick');
  t.truthy(first);
  t.is(messages.length, 2);
  for (const m of messages) {
    const html = String((await simpleParser(m.raw)).html || '');
    const links = hrefs(html);
    t.true(links.includes('https://example.com/offer'), html);
    t.false(links.some((l) => l.includes('/t/c/')), 'no link rewritten');
    t.truthy(pixel(html), 'opens follow the domain');
  }
  const list = (await w.t0.request('GET', '/v1/emails?limit=2')).body.data;
  for (const e of list) t.like(await getEmail(e.id), { clickTracking: false, openTracking: null });
});

test.serial('SMTP submission: X-Posthorn-Tracking: off sends untracked and is not in the sent message; on tracks', async (t) => {
  await setDomain(true, true);
  const tx = submissionTransport(w.t0);
  try {
    const from = `Sender <hello@${w.domain.name}>`;
    await tx.sendMail({ from, to: 'alice@example.net', subject: 'smtp-off', html: HTML, headers: { 'X-Posthorn-Tracking': 'off' } });
    let msg = await received('smtp-off');
    let html = String((await simpleParser(msg.raw)).html || '');
    t.deepEqual(hrefs(html), [ORIGINAL]);
    t.is(pixel(html), undefined);
    t.false(/x-posthorn-tracking/i.test(msg.raw.toString('latin1')), 'the header is not sent on');

    await setDomain(false, false);
    await tx.sendMail({ from, to: 'alice@example.net', subject: 'smtp-on', html: HTML, headers: { 'X-Posthorn-Tracking': 'on' } });
    msg = await received('smtp-on');
    html = String((await simpleParser(msg.raw)).html || '');
    t.regex(hrefs(html)[0]!, /\/t\/c\//);
    t.truthy(pixel(html));

    const bad = await tx.sendMail({ from, to: 'alice@example.net', subject: 'smtp-bad', html: HTML, headers: { 'X-Posthorn-Tracking': 'sometimes' } }).then(
      () => undefined,
      (err: { responseCode?: number; response?: string }) => err,
    );
    t.is(bad?.responseCode, 550);
    t.regex(bad?.response ?? '', /X-Posthorn-Tracking/);
  } finally {
    tx.close();
  }
});

test.serial("the console's email page says when the email chose its own tracking", async (t) => {
  await consoleUser(w.t0.app, 'op@sender.dev', w.t0.teamId);
  const c = new ConsoleClient(w.t0.baseUrl);
  await c.signIn('op@sender.dev');
  const off = await send({ subject: 'console-off', openTracking: false, clickTracking: false });
  const clicksOff = await send({ subject: 'console-clicks', clickTracking: false });
  const plain = await send({ subject: 'console-plain' });
  await w.settle();
  t.regex((await c.get(`/console/emails/${off}`)).text, /Tracking<\/dt>\s*<dd>off for this email</);
  t.regex((await c.get(`/console/emails/${clicksOff}`)).text, /Tracking<\/dt>\s*<dd>clicks off for this email</);
  t.notRegex((await c.get(`/console/emails/${plain}`)).text, /Tracking<\/dt>/);
});
