import test from 'ava';
import { SINK_HOST, startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { startTestApp } from '../helpers/test-app.js';
import { twoTeams } from '../helpers/two-teams.js';
import { startWebhookReceiver, verifySignature, type WebhookReceiver } from '../webhooks/webhook-receiver.js';

// Sandbox mode end to end: a domain that never verified sends; the message goes through the
// whole pipeline (compose, DKIM, click tracking, events, webhooks) and lands in the capture
// mailbox, while the SMTP sink that is every recipient's MX sees no connection at all.

let w: MailWorld;
let receiver: WebhookReceiver;
let fresh: any;

test.before(async () => {
  receiver = await startWebhookReceiver();
  w = await startMailWorld({ overrides: { sandbox: true, webhooks: { allowPrivate: true } } });
  const created = await w.t0.request('POST', '/v1/domains', { body: { name: 'fresh-start.dev', region: 'local' } });
  if (created.status !== 200) throw new Error(JSON.stringify(created.body));
  fresh = created.body;
  await w.t0.request('PATCH', `/v1/domains/${fresh.id}`, { body: { clickTracking: true } });
});
test.after.always(async () => {
  await w?.close();
  await receiver?.close();
});

test.serial('/health announces sandbox mode', async (t) => {
  const health = await w.t0.request('GET', '/health', { key: null });
  t.is(health.status, 200);
  t.is(health.body.sandbox, true);
});

test.serial('a never-verified domain sends: DELIVERED to the capture mailbox through the whole pipeline, and nothing reaches any MX', async (t) => {
  const hook = (await w.t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['email.queued', 'email.sent', 'email.delivered'] } })).body;
  t.is(fresh.status, 'PENDING');
  // The recipients' domains: no lookup of their MX (or their hosts' addresses, or an MTA-STS
  // or DANE policy) may be made. The zone's other queries are not counted: a re-check of the
  // unverified domain (cron, every ten minutes of the wall clock) may fall inside the test.
  const names = ['example.org', 'example.net', '_mta-sts.example.org', '_mta-sts.example.net', SINK_HOST, `_25._tcp.${SINK_HOST}`];
  const recipientLookups = () => names.reduce((n, name) => n + ['MX', 'A', 'AAAA', 'TXT', 'TLSA'].reduce((m, type) => m + w.zone.queriesFor(name, type), 0), 0);
  const queriesBefore = recipientLookups();
  const sent = await w.t0.request('POST', '/v1/emails', {
    body: {
      from: 'Fresh <hello@fresh-start.dev>',
      to: ['alice@example.org'],
      cc: 'carol@example.net',
      replyTo: 'support@fresh-start.dev',
      subject: 'Sandbox hello',
      text: 'It works',
      html: '<p>It works: <a href="https://docs.example.com/start">read on</a></p>',
      attachments: [{ filename: 'note.txt', content: Buffer.from('attached').toString('base64') }],
      headers: { 'X-Campaign': 'first-hour' },
    },
  });
  t.is(sent.status, 200, JSON.stringify(sent.body));
  const emailId = sent.body.emailId;
  await w.settle();

  const email = (await w.t0.request('GET', `/v1/emails/${emailId}`)).body;
  t.is(email.latestStatus, 'DELIVERED');
  t.deepEqual(email.emailEvents.map((e: any) => e.status), ['QUEUED', 'SENT', 'DELIVERED', 'DELIVERED']);
  for (const e of email.emailEvents.filter((x: any) => x.status === 'DELIVERED')) {
    t.is(e.data.mxHost, 'sandbox');
    t.regex(e.data.response, /^250 2\.0\.0 captured by the Posthorn sandbox as sm_/);
  }
  t.is(w.sink.connectionCount, 0, 'no connection to the MX of any recipient');
  t.is(w.sink.messages.length, 0);
  t.is(recipientLookups(), queriesBefore, 'not even an MX lookup');
  t.is((await w.t0.request('GET', `/v1/domains/${fresh.id}`)).body.status, 'PENDING', 'still never verified');

  // One message per transaction: one per recipient domain, newest first.
  const list = (await w.t0.request('GET', '/v1/sandbox/messages')).body;
  t.is(list.total, 2);
  t.like(list, { page: 1, limit: 25, totalPage: 1, hasMore: false });
  const rcpts = list.messages.map((m: any) => m.envelope.rcptTo).flat().sort();
  t.deepEqual(rcpts, ['alice@example.org', 'carol@example.net']);
  for (const m of list.messages) {
    t.deepEqual(Object.keys(m).sort(), ['emailId', 'envelope', 'id', 'receivedAt', 'subject']);
    t.is(m.emailId, emailId);
    t.is(m.subject, 'Sandbox hello');
    t.regex(m.envelope.mailFrom, new RegExp(`^bounces\\+${emailId}_[0-9a-f]{12}@bounces\\.fresh-start\\.dev$`));
  }

  const oneRes = await w.t0.request('GET', `/v1/sandbox/messages/${list.messages[0].id}`);
  // The raw message travels as a JSON string: the type is JSON, and a browser may not sniff another.
  t.is(oneRes.headers.get('x-content-type-options'), 'nosniff');
  t.regex(oneRes.headers.get('content-type') ?? '', /^application\/json/);
  const one = oneRes.body;
  t.is(one.domainId, fresh.id);
  t.is(one.sizeBytes, Buffer.byteLength(one.raw));
  t.regex(one.raw, /^DKIM-Signature: /m);
  t.like(one.parsed, { from: 'Fresh <hello@fresh-start.dev>', to: ['alice@example.org'], cc: ['carol@example.net'], replyTo: ['support@fresh-start.dev'], subject: 'Sandbox hello' });
  t.is(one.parsed.text.trim(), 'It works');
  t.deepEqual(one.parsed.attachments, [{ filename: 'note.txt', contentType: 'text/plain', size: 8 }]);
  t.true(one.parsed.headers.some((h: any) => h.name === 'X-Campaign' && h.value === 'first-hour'));
  t.true(one.parsed.headers.some((h: any) => h.name === 'X-Posthorn-Email-ID' && h.value === emailId));
  // Click tracking rewrote the link, as it would for a real send.
  t.false(one.parsed.html.includes('href="https://docs.example.com/start"'));
  t.regex(one.parsed.html, /href="http:\/\/posthorn\.test\/t\/c\//);

  // The signature is valid: publish the domain's DKIM key (only it: the domain stays unverified).
  const dkim = fresh.dnsRecords.find((r: any) => r.type === 'TXT' && r.name.includes('._domainkey.'));
  w.zone.set(dkim.name, 'TXT', [dkim.value]);
  t.is(await w.dkimStatus(Buffer.from(one.raw)), 'pass');

  // Webhooks fired for the real events, signed as usual.
  await w.t0.app.webhookDispatcher.whenIdle();
  const calls = await receiver.waitFor(3);
  const types = calls.map((c) => c.json.type);
  t.true(['email.queued', 'email.sent', 'email.delivered'].every((type) => types.includes(type)), types.join());
  for (const c of calls) t.true(verifySignature(hook.secret, c));
});

test.serial('the capture mailbox is the team\'s: another team and a key bound to another domain see none of it', async (t) => {
  const mine = (await w.t0.request('GET', '/v1/sandbox/messages')).body.messages;
  t.true(mine.length > 0);
  const otherKey = (await twoTeams(w.t0)).b.key;
  const theirs = (await w.t0.request('GET', '/v1/sandbox/messages', { key: otherKey })).body;
  t.deepEqual([theirs.messages, theirs.total], [[], 0]);
  t.is((await w.t0.request('GET', `/v1/sandbox/messages/${mine[0].id}`, { key: otherKey })).status, 404);
  // A key bound to the mail world's verified domain: fresh-start.dev's messages are not its own.
  const bound = (await w.t0.request('POST', '/v1/apiKeys', { body: { name: 'bound', permission: 'FULL', domainId: w.domain.id } })).body.token;
  const boundList = (await w.t0.request('GET', '/v1/sandbox/messages', { key: bound })).body;
  t.is(boundList.total, 0);
  t.is((await w.t0.request('GET', `/v1/sandbox/messages/${mine[0].id}`, { key: bound })).status, 404);
  // A SENDING key does not read mailboxes.
  const sending = (await w.t0.request('POST', '/v1/apiKeys', { body: { name: 'sender', permission: 'SENDING' } })).body.token;
  t.is((await w.t0.request('GET', '/v1/sandbox/messages', { key: sending })).status, 403);
});

test.serial('pages are newest first', async (t) => {
  const ids: string[] = [];
  for (const subject of ['first', 'second', 'third']) {
    const res = await w.t0.request('POST', '/v1/emails', { body: { from: 'hello@fresh-start.dev', to: 'dave@example.org', subject, text: subject } });
    ids.push(res.body.emailId);
    await w.settle();
  }
  const page = (await w.t0.request('GET', '/v1/sandbox/messages?limit=2')).body;
  t.deepEqual(page.messages.map((m: any) => m.subject), ['third', 'second']);
  t.true(page.hasMore);
  const next = (await w.t0.request('GET', '/v1/sandbox/messages?limit=2&page=2')).body;
  t.is(next.messages[0].subject, 'first');
});

test('outside sandbox mode the routes are 404, and an unverified domain is refused plainly', async (t) => {
  const t0 = await startTestApp();
  try {
    const list = await t0.request('GET', '/v1/sandbox/messages');
    t.is(list.status, 404);
    t.regex(list.body.error.message, /sandbox mode is off/);
    t.is(list.headers.get('x-content-type-options'), 'nosniff', 'errors too: every API response');
    t.is((await t0.request('GET', '/v1/sandbox/messages/sm_abcdefghijklmnopqrstu')).status, 404);
    t.is((await t0.request('GET', '/health', { key: null })).body.sandbox, false);
    const d = (await t0.request('POST', '/v1/domains', { body: { name: 'not-yet.dev', region: 'local' } })).body;
    const res = await t0.request('POST', '/v1/emails', { body: { from: 'a@not-yet.dev', to: 'b@example.org', subject: 's', text: 't' } });
    t.is(res.status, 403);
    t.regex(res.body.error.message, new RegExp(`^domain not-yet\\.dev is not verified yet; publish the DNS records listed by GET /v1/domains/${d.id}`));
    // The CLI's way too: `posthorn send` gets the same message.
    t.true(res.body.error.message.includes('/verify or posthorn domains verify not-yet.dev (or, to try sending without DNS, sandbox mode: POSTHORN_SANDBOX=true'), res.body.error.message);
    t.notRegex(res.body.error.message, /TEMPORARY_FAILURE|status/);
  } finally {
    await t0.close();
  }
});

test.serial('an email id where a sandbox message id goes is a 404 that says which id to use', async (t) => {
  // The README's newcomer has the em_... id from the send in hand, not the sm_... one.
  const sent = await w.t0.request('POST', '/v1/emails', { body: { from: 'hello@fresh-start.dev', to: 'erin@example.org', subject: 'which id', text: 'x' } });
  await w.settle();
  const res = await w.t0.request('GET', `/v1/sandbox/messages/${sent.body.emailId}`);
  t.is(res.status, 404);
  t.is(res.body.error.code, 'NOT_FOUND');
  t.regex(res.body.error.message, new RegExp(`^${sent.body.emailId} is an email id, not a sandbox message id \\(sm_\\.\\.\\.\\): GET /v1/sandbox/messages lists the captured messages with their emailId`));
  t.is((await w.t0.request('GET', '/v1/sandbox/messages/sm_nothing')).body.error.message, 'sandbox message sm_nothing not found');
});
