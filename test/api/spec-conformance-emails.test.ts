import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';

// Probes of the spec's Emails endpoints (send body, Errors: 400 naming the field) and of the
// email and campaign state rules (States and transitions) that the feature suites leave out.
// Sends are scheduled far ahead or go to a domain with no MX: nothing reaches a network.

let t0: TestApp;
let from: string;
test.before(async () => {
  t0 = await startTestApp();
  from = `States <hello@${(await addVerifiedDomain(t0, 'states.dev')).name}>`;
});
test.after.always(async () => {
  await t0?.close();
});

const LATER = '2099-01-01T00:00:00.000Z';
const send = (extra: Record<string, unknown> = {}) => ({ from, to: 'someone@example.net', subject: 'States', text: 'Hello', scheduledAt: LATER, ...extra });

test('Send body: text, html and inReplyToId take null ("string or null"), and replyTo, cc and bcc a string or a list', async (t) => {
  const bodies = [
    send({ text: null, html: '<p>Hello</p>' }),
    send({ html: null }),
    send({ inReplyToId: null }),
    send({ replyTo: 'reply@example.net', cc: ['a@example.net', 'b@example.net'], bcc: 'c@example.net' }),
  ];
  for (const body of bodies) {
    const res = await t0.request('POST', '/v1/emails', { body });
    t.is(res.status, 200, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
  }
  const both = await t0.request('POST', '/v1/emails', { body: send({ text: null, html: null }) });
  t.is(both.status, 400);
  t.is(both.body.error.code, 'BAD_REQUEST');
});

test('Errors, BAD_REQUEST: a bad field of a batch item is named by its place in the batch, as [i].field, whichever check finds it', async (t) => {
  const cases: [unknown[], RegExp][] = [
    [[send(), send({ from: undefined })], /^\[1\]\.from: is required/],
    [[send(), send(), send({ cc: 5 })], /^\[2\]\.cc: /],
    [[send({ tags: ['ok', ''] })], /^\[0\]\.tags\[1\]: /],
    [[send(), send({ to: 'not-an-address' })], /^\[1\]\.to: /],
    [[send({ attachments: [{ filename: 'a.txt', content: 'eA==' }, { content: 'eA==' }] })], /^\[0\]\.attachments\[1\]\.filename: is required/],
    [[send(), send({ headers: { 'Message-ID': '<x@y>' } })], /^\[1\]\.headers\.Message-ID: /],
    [[send(), send({ headers: { 'X-A': 'a'.repeat(1000) } })], /^\[1\]\.headers\.X-A: /],
    [[send(), send({ headers: { 'X A': 'v' } })], /^\[1\]\.headers: "X A" is not a valid header name/],
    [[send(), send({ headers: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`X-${i}`, 'v'])) })], /^\[1\]\.headers: at most 50/],
    [[send(), send(), send({ templateId: 'tp_nope', subject: undefined, text: undefined })], /^\[2\]\.templateId: template tp_nope not found/],
    [[send(), send({ bcc: ['a@example.net', 'x@xn--zz.example'] })], /^\[1\]\.bcc\[1\]: "x@xn--zz\.example" is not a valid email address/],
    [[send({ attachments: [{ filename: 'a.txt', content: ' ' }] })], /^\[0\]\.attachments\[0\]\.content: must not be empty/],
  ];
  for (const [body, message] of cases) {
    const res = await t0.request('POST', '/v1/emails/batch', { body });
    t.is(res.status, 400);
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, message);
  }
  // A single send names the field alone, list places in brackets.
  const single = await t0.request('POST', '/v1/emails', { body: send({ attachments: [{ content: 'eA==' }] }) });
  t.regex(single.body.error.message, /^attachments\[0\]\.filename: is required/);
});

test('Errors, FORBIDDEN: a batch item whose sending domain is refused is named by its place, as a 400 is', async (t) => {
  for (const bad of ['Other <hi@not-this-teams.dev>', 'hi@unverified-states.dev']) {
    if (bad.includes('unverified')) await t0.request('POST', '/v1/domains', { body: { name: 'unverified-states.dev', region: 'r' } });
    const res = await t0.request('POST', '/v1/emails/batch', { body: [send(), send({ from: bad })] });
    t.is(res.status, 403, JSON.stringify(res.body));
    t.is(res.body.error.code, 'FORBIDDEN');
    t.regex(res.body.error.message, /^\[1\]\.from: domain (not-this-teams|unverified-states)\.dev is not/);
  }
  // A single send keeps the words alone.
  const single = await t0.request('POST', '/v1/emails', { body: send({ from: 'hi@not-this-teams.dev' }) });
  t.is(single.status, 403);
  t.regex(single.body.error.message, /^domain not-this-teams\.dev is not a domain of this team/);
});

test('Send body with templateId: the request\'s html or text is the body, as its subject is the subject; the template fills in the rest', async (t) => {
  const template = (await t0.request('GET', '/v1/templates?limit=1')).body.templates[0];
  const stored = async (extra: Record<string, unknown>) => {
    const res = await t0.request('POST', '/v1/emails', { body: send({ subject: undefined, text: undefined, templateId: template.id, ...extra }) });
    t.is(res.status, 200, JSON.stringify(res.body));
    return (await t0.request('GET', `/v1/emails/${res.body.emailId}`)).body;
  };
  const html = await stored({ html: '<p>Mine</p>' });
  t.is(html.html, '<p>Mine</p>');
  t.is(html.text, null, 'no template text describing another body');
  t.truthy(html.subject, "the template's subject");
  const text = await stored({ text: 'Mine' });
  t.is(text.text, 'Mine');
  t.is(text.html, null);
  const both = await stored({ subject: 'Own', html: '<p>Mine</p>', text: 'Mine' });
  t.deepEqual([both.subject, both.html, both.text], ['Own', '<p>Mine</p>', 'Mine']);
  const templateOnly = await stored({});
  t.truthy(templateOnly.html);
  t.not(templateOnly.html, '<p>Mine</p>');
});

test('Email status: PATCH and cancel apply only to a scheduled email; a queued or cancelled one is 400 naming its status, a missing one 404', async (t) => {
  // No MX for this domain: the email is accepted as QUEUED and bounces, never SCHEDULED.
  const now = await t0.request('POST', '/v1/emails', { body: send({ to: 'x@no-mx.invalid', scheduledAt: undefined }) });
  t.is(now.status, 200);
  const cancelNow = await t0.request('POST', `/v1/emails/${now.body.emailId}/cancel`);
  t.is(cancelNow.status, 400);
  t.is(cancelNow.body.error.code, 'BAD_REQUEST');
  t.regex(cancelNow.body.error.message, /only a scheduled email can be cancelled/);
  const patchNow = await t0.request('PATCH', `/v1/emails/${now.body.emailId}`, { body: { scheduledAt: LATER } });
  t.is(patchNow.status, 400);
  t.regex(patchNow.body.error.message, /only a scheduled email can be rescheduled/);

  const later = await t0.request('POST', '/v1/emails', { body: send() });
  t.is((await t0.request('GET', `/v1/emails/${later.body.emailId}`)).body.latestStatus, 'SCHEDULED');
  t.deepEqual((await t0.request('POST', `/v1/emails/${later.body.emailId}/cancel`)).body, { emailId: later.body.emailId });
  const cancelled = await t0.request('GET', `/v1/emails/${later.body.emailId}`);
  t.is(cancelled.body.latestStatus, 'CANCELLED');
  const patchCancelled = await t0.request('PATCH', `/v1/emails/${later.body.emailId}`, { body: { scheduledAt: LATER } });
  t.is(patchCancelled.status, 400);
  t.regex(patchCancelled.body.error.message, /is CANCELLED; only a scheduled email can be rescheduled/);
  t.is((await t0.request('GET', `/v1/emails/${later.body.emailId}`)).body.latestStatus, 'CANCELLED', 'still cancelled');

  for (const [method, path, body] of [['PATCH', '/v1/emails/em_missing', { scheduledAt: LATER }], ['POST', '/v1/emails/em_missing/cancel', undefined]] as const) {
    const res = await t0.request(method, path, body ? { body } : {});
    t.is(res.status, 404, path);
    t.is(res.body.error.code, 'NOT_FOUND');
  }
});

test('Campaign status: pause applies to a running campaign only (a scheduled one is 400); a deleted campaign is 404 to every operation', async (t) => {
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Campaign states' } })).body.id;
  await t0.request('POST', `/v1/contactBooks/${book}/contacts`, { body: { email: 'reader@example.net' } });
  const c = (await t0.request('POST', '/v1/campaigns', { body: { name: 'States', from, subject: 's', contactBookId: book, html: '<p>x</p>' } })).body;
  t.is((await t0.request('POST', `/v1/campaigns/${c.id}/schedule`, { body: { scheduledAt: LATER } })).status, 200);
  const pause = await t0.request('POST', `/v1/campaigns/${c.id}/pause`);
  t.is(pause.status, 400);
  t.is(pause.body.error.code, 'BAD_REQUEST');
  t.regex(pause.body.error.message, /SCHEDULED; only a running campaign can be paused/);
  const resume = await t0.request('POST', `/v1/campaigns/${c.id}/resume`);
  t.is(resume.status, 400);
  t.regex(resume.body.error.message, /only a paused campaign can be resumed/);
  t.is((await t0.request('DELETE', `/v1/campaigns/${c.id}`)).status, 200);
  const ops: [string, string, unknown?][] = [
    ['GET', ''],
    ['PATCH', '', { name: 'x' }],
    ['POST', '/schedule', {}],
    ['POST', '/pause'],
    ['POST', '/resume'],
    ['DELETE', ''],
  ];
  for (const [method, suffix, body] of ops) {
    const res = await t0.request(method, `/v1/campaigns/${c.id}${suffix}`, body === undefined ? {} : { body });
    t.is(res.status, 404, `${method} ${suffix}`);
    t.is(res.body.error.code, 'NOT_FOUND');
  }
});

test('PATCH scheduledAt is bounded as the send body bounds it: a long text is a 400 naming the bound, not read word by word', async (t) => {
  const later = await t0.request('POST', '/v1/emails', { body: send() });
  t.is(later.status, 200);
  // Plain-English parsing grows faster than the text: a megabyte of "tomorrow and ..." held the
  // event loop for about 20 s (a 40 MB body, for hours) before answering 400.
  const long = 'tomorrow and '.repeat(20);
  const sent = await t0.request('POST', '/v1/emails', { body: send({ scheduledAt: long }) });
  t.is(sent.status, 400);
  const patched = await t0.request('PATCH', `/v1/emails/${later.body.emailId}`, { body: { scheduledAt: long } });
  t.is(patched.status, 400);
  t.is(patched.body.error.code, 'BAD_REQUEST');
  t.is(patched.body.error.message, sent.body.error.message);
  t.regex(patched.body.error.message, /^scheduledAt: .*200/);
  t.is((await t0.request('GET', `/v1/emails/${later.body.emailId}`)).body.scheduledAt, LATER, 'unchanged');
});
