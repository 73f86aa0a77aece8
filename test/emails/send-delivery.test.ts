import { repositoriesOf } from '../helpers/repositories.js';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';

let w: MailWorld;
test.before(async () => {
  w = await startMailWorld();
});
test.after.always(async () => {
  await w?.close();
});

async function waitForStatus(id: string, status: string) {
  for (let i = 0; i < 50; i++) {
    await w.settle();
    const res = await w.t0.request('GET', `/v1/emails/${id}`);
    if (res.body.latestStatus === status) return res.body;
  }
  throw new Error(`email ${id} never reached ${status}`);
}

test.serial('a send is accepted, DKIM-signed and delivered to the recipient MX; events record each step', async (t) => {
  const before = w.sink.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', {
    body: sendBody(w, {
      to: ['Alice <alice@example.net>'],
      cc: 'carol@example.org',
      bcc: ['bob@example.net'],
      replyTo: 'replies@sender.dev',
      html: '<p>Hi <b>there</b></p>',
      headers: { 'X-Campaign': 'launch' },
      attachments: [{ filename: 'notes.txt', content: Buffer.from('attached bytes').toString('base64') }],
      tags: ['welcome', 'onboarding'],
    }),
  });
  t.is(res.status, 200);
  t.regex(res.body.emailId, /^em_[0-9a-z]{9}[A-Za-z0-9]{21}$/);
  const email = await waitForStatus(res.body.emailId, 'DELIVERED');
  // The id and the Message-ID begin with the time of acceptance (index locality, lib/ids.ts)
  t.is(parseInt(res.body.emailId.slice(3, 12), 36), Date.parse(email.createdAt));
  const received = w.sink.messages.slice(before);
  // alice, bob (both at example.net) and carol: one transaction per recipient.
  t.is(received.length, 3);
  t.deepEqual(received.map((m) => m.rcptTo.join()).sort(), ['alice@example.net', 'bob@example.net', 'carol@example.org']);
  const net = received.find((m) => m.rcptTo.includes('alice@example.net'))!;
  // VERP: the email id and a keyed tag of this transaction's recipient (return-path-token.ts).
  t.regex(net.mailFrom, new RegExp(`^bounces\\+${res.body.emailId}_[0-9a-f]{12}@bounces\\.sender\\.dev$`));
  t.is(new Set(received.map((m) => m.mailFrom)).size, 3, 'each its own return path');
  t.true(net.secure, 'STARTTLS was used');
  t.is(await w.dkimStatus(net.raw), 'pass');
  const parsed = await simpleParser(net.raw);
  t.is(parsed.subject, 'Hello');
  t.is(parsed.from?.value[0]?.address, 'hello@sender.dev');
  t.is(parsed.headers.get('x-campaign'), 'launch');
  t.is(parsed.headers.get('bcc'), undefined);
  t.regex(String(parsed.messageId), /^<?[0-9a-z]{9}\.[0-9a-z]{24}@sender\.dev>?$/);
  t.is(parseInt(String(parsed.messageId).replace(/^</, '').slice(0, 9), 36), Date.parse(email.createdAt));
  t.is(parsed.attachments[0]?.filename, 'notes.txt');
  t.is(parsed.attachments[0]?.contentType, 'text/plain');
  t.is(parsed.attachments[0]?.content.toString(), 'attached bytes');
  t.regex(parsed.text ?? '', /Hi there/);
  const statuses = email.emailEvents.map((e: any) => e.status);
  t.deepEqual(statuses.slice(0, 2), ['QUEUED', 'SENT']);
  t.is(statuses.filter((s: string) => s === 'DELIVERED').length, 3);
  const delivered = email.emailEvents.find((e: any) => e.status === 'DELIVERED');
  t.is(delivered.data.mxHost, 'mx.sink.test');
  t.truthy(delivered.data.recipient);
  t.regex(delivered.data.response, /250/);
  t.is(email.teamId, w.t0.teamId);
  t.deepEqual(email.tags, ['welcome', 'onboarding']);
  t.is(email.to, 'Alice <alice@example.net>');
});

test.serial('several emails to one domain reuse connections', async (t) => {
  const conns = w.sink.connectionCount;
  const before = w.sink.messages.length;
  const ids = [];
  for (let i = 0; i < 8; i++) ids.push((await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { subject: `n${i}` }) })).body.emailId);
  await w.sink.waitForMessages(before + 8);
  await w.settle();
  t.true(w.sink.connectionCount - conns < 8, `${w.sink.connectionCount - conns} connections for 8 messages`);
});

test.serial('a 5.1.1 unknown user hard-bounces and suppresses only that recipient', async (t) => {
  w.sink.setBehaviour({ onRcpt: (a) => (a === 'ghost@example.net' ? { code: 550, message: '5.1.1 <ghost@example.net>: user unknown' } : undefined) });
  try {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: ['ghost@example.net', 'real@example.net'] }) });
    const email = await waitForStatus(res.body.emailId, 'BOUNCED');
    const bounce = email.emailEvents.find((e: any) => e.status === 'BOUNCED');
    t.is(bounce.data.recipient, 'ghost@example.net');
    t.is(bounce.data.bounce.type, 'Permanent');
    t.is(bounce.data.bounce.subType, 'NoEmail');
    t.is(bounce.data.mxHost, 'mx.sink.test');
    t.true(email.emailEvents.some((e: any) => e.status === 'DELIVERED' && e.data.recipient === 'real@example.net'));
    const sup = await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'ghost@example.net');
    t.is(sup?.reason, 'HARD_BOUNCE');
    t.is(sup?.source, res.body.emailId);
    t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'real@example.net'), undefined);
    // The next send to the suppressed address is SUPPRESSED and nothing goes out.
    const again = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'ghost@example.net' }) });
    const suppressed = (await w.t0.request('GET', `/v1/emails/${again.body.emailId}`)).body;
    t.is(suppressed.latestStatus, 'SUPPRESSED');
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
});

test.serial('a policy 5.7.1 rejection bounces without suppressing', async (t) => {
  w.sink.setBehaviour({ onRcpt: () => ({ code: 554, message: '5.7.1 Service unavailable; client host blocked using zen.spamhaus.org' }) });
  try {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'policy@example.net' }) });
    const email = await waitForStatus(res.body.emailId, 'BOUNCED');
    const bounce = email.emailEvents.find((e: any) => e.status === 'BOUNCED').data.bounce;
    t.is(bounce.type, 'Transient');
    t.is(bounce.subType, 'Policy');
    t.is(bounce.category, 'blocklist');
    t.is(await repositoriesOf(w.t0.app).suppressions.get(w.t0.teamId, 'policy@example.net'), undefined);
  } finally {
    w.sink.setBehaviour({ onRcpt: undefined });
  }
});

test.serial('cc/bcc on the suppression list are dropped and named; all To suppressed means SUPPRESSED', async (t) => {
  const now = new Date().toISOString();
  await repositoriesOf(w.t0.app).suppressions.add(w.t0.teamId, 'blocked@example.org', 'MANUAL', 'test', now);
  const before = w.sink.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'ok@example.net', cc: 'Blocked@Example.org' }) });
  const email = await waitForStatus(res.body.emailId, 'DELIVERED');
  t.deepEqual(email.emailEvents[0].data.suppressedRecipients, ['Blocked@example.org']);
  t.false(w.sink.messages.slice(before).some((m) => m.rcptTo.some((r) => r.toLowerCase() === 'blocked@example.org')));
  const all = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: ['blocked@example.org'] }) });
  const sup = (await w.t0.request('GET', `/v1/emails/${all.body.emailId}`)).body;
  t.is(sup.latestStatus, 'SUPPRESSED');
  t.deepEqual(sup.emailEvents.map((e: any) => e.status), ['SUPPRESSED']);
});

test.serial('an internationalised domain is one domain however it is written: A-labels in the envelope, one delivery, one suppression key', async (t) => {
  w.addRecipientDomain('xn--bcher-kva.example');
  const before = w.sink.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'leser@Bücher.example', cc: 'LESER@xn--bcher-kva.example' }) });
  t.is(res.status, 200, JSON.stringify(res.body));
  await waitForStatus(res.body.emailId, 'DELIVERED');
  // One copy (smtp-server shows the domain back in Unicode); the row holds what went into RCPT TO.
  const got = w.sink.messages.slice(before).flatMap((m) => m.rcptTo);
  t.deepEqual(got, ['leser@bücher.example']);
  const rows = await repositoriesOf(w.t0.app).deliveries.listForEmail(res.body.emailId);
  t.deepEqual(rows.map((r) => [r.recipient, r.rcpt_domain]), [['leser@xn--bcher-kva.example', 'xn--bcher-kva.example']]);
  // Suppressed in one form, suppressed in the other.
  t.is((await w.t0.request('POST', '/v1/suppressions', { body: { email: 'leser@bücher.example' } })).status, 200);
  const again = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'leser@xn--bcher-kva.example' }) });
  t.is((await w.t0.request('GET', `/v1/emails/${again.body.emailId}`)).body.latestStatus, 'SUPPRESSED');
  await w.t0.request('DELETE', '/v1/suppressions/leser@xn--bcher-kva.example');
  // A capital Σ ending the domain is σ in the envelope and in the suppression key alike.
  t.is((await w.t0.request('POST', '/v1/suppressions', { body: { email: 'ute@example.ΕΛΛΆΣ' } })).status, 200);
  const sigma = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'ute@example.ΕΛΛΆΣ' }) });
  t.is(sigma.status, 200, JSON.stringify(sigma.body));
  t.is((await w.t0.request('GET', `/v1/emails/${sigma.body.emailId}`)).body.latestStatus, 'SUPPRESSED');
  // A domain that is no valid IDN is refused at the API.
  const bad = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'x@b\u00fccher-.example' }) });
  t.is(bad.status, 400);
});

test.serial('a null MX (RFC 7505) is a permanent failure', async (t) => {
  w.zone.set('nullmx.example', 'MX', [{ exchange: '.', priority: 0 }]);
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'x@nullmx.example' }) });
  const email = await waitForStatus(res.body.emailId, 'BOUNCED');
  t.regex(email.emailEvents.find((e: any) => e.status === 'BOUNCED').data.response, /no mail|null MX|accepts no mail/i);
});

test.serial('an MX target with a NUL in its name is not used, and nothing of it is stored: the next MX takes the mail (the row and events are text every store keeps)', async (t) => {
  // dns-packet writes any octet into a label; a hostile zone's MX named so resolved, was
  // connected to and stored, and PostgreSQL refused the NUL: the delivery stayed leased and the
  // accepted message was sent again when the lease ran out.
  w.zone.set('nul\u0000mx.oddmx.example', 'A', ['127.0.0.1']);
  w.zone.set('oddmx.example', 'MX', [
    { exchange: 'nul\u0000mx.oddmx.example', priority: 0 },
    { exchange: 'mx.sink.test', priority: 10 },
  ]);
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'x@oddmx.example' }) });
  const email = await waitForStatus(res.body.emailId, 'DELIVERED');
  t.is(email.emailEvents.find((e: any) => e.status === 'DELIVERED').data.mxHost, 'mx.sink.test');
  const rows = await w.t0.app.store.db.selectFrom('deliveries').select(['state', 'mx_host', 'lease_owner']).where('email_id', '=', res.body.emailId).execute();
  t.deepEqual(rows, [{ state: 'delivered', mx_host: 'mx.sink.test', lease_owner: null }]);
});

test.serial('inReplyToId threads the reply with In-Reply-To and References', async (t) => {
  const first = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'thread@example.net', subject: 'First' }) });
  await waitForStatus(first.body.emailId, 'DELIVERED');
  const firstMsg = w.sink.messages.find((m) => m.rcptTo.includes('thread@example.net'))!;
  const firstId = (await simpleParser(firstMsg.raw)).messageId;
  const before = w.sink.messages.length;
  const reply = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'thread@example.net', subject: 'Re: First', inReplyToId: first.body.emailId }) });
  await waitForStatus(reply.body.emailId, 'DELIVERED');
  const parsed = await simpleParser(w.sink.messages.slice(before).find((m) => m.rcptTo.includes('thread@example.net'))!.raw);
  t.is(parsed.inReplyTo, firstId!);
  t.is(String(parsed.references), String(firstId));
  const bad = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { inReplyToId: 'em_doesnotexist' }) });
  t.is(bad.status, 400);
});

/** The one message the sink received for this recipient, parsed, with its MIME parts' types. */
async function receivedBy(recipient: string) {
  const m = w.sink.messages.find((x) => x.rcptTo.includes(recipient))!;
  // mailparser's own HTML-to-text would make a text of the HTML (or fail on the deep one)
  const parsed = await simpleParser(m.raw, { skipHtmlToText: true });
  const types = [...m.raw.toString('latin1').matchAll(/^Content-Type: ([\w/-]+)/gim)].map((x) => x[1]!.toLowerCase());
  return { raw: m.raw, parsed, types };
}

test.serial('an HTML-only send gets a plain-text alternative made from its HTML as given: the links are the original ones, not the tracked ones', async (t) => {
  const res = await w.t0.request('POST', '/v1/emails', {
    body: sendBody(w, { to: 'htmlonly@example.net', text: undefined, html: '<p>Hi <b>there</b>, <a href="https://example.com/docs">read this</a></p>', clickTracking: true, openTracking: true }),
  });
  t.is(res.status, 200);
  await waitForStatus(res.body.emailId, 'DELIVERED');
  const { raw, parsed, types } = await receivedBy('htmlonly@example.net');
  t.is(await w.dkimStatus(raw), 'pass');
  t.true(types.includes('text/plain'));
  t.regex(parsed.text ?? '', /Hi there, read this \[https:\/\/example\.com\/docs\]/);
  t.regex(String(parsed.html), /\/t\/c\//, 'the HTML links are tracked');
});

test.serial('an HTML-only send whose HTML is over the conversion bound is delivered HTML-only, its HTML whole', async (t) => {
  // Ordinary paragraphs, just over 256 KB: the conversion would hold up the whole process.
  const html = `<p>Paragraph of ordinary newsletter text, nothing special in it.</p>`.repeat(Math.ceil((256 * 1024) / 66) + 10);
  t.true(html.length > 256 * 1024);
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'bightml@example.net', text: undefined, html }) });
  t.is(res.status, 200);
  await waitForStatus(res.body.emailId, 'DELIVERED');
  const { raw, parsed, types } = await receivedBy('bightml@example.net');
  t.is(await w.dkimStatus(raw), 'pass');
  t.false(types.includes('text/plain'), 'no text part');
  t.falsy(parsed.text);
  t.is(String(parsed.html).trimEnd(), html);
});

test.serial('an HTML-only send nested too deeply for the converter is delivered HTML-only (not deferred, not refused)', async (t) => {
  const depth = 20_000;
  const html = `${'<div>'.repeat(depth)}deep${'</div>'.repeat(depth)}`;
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'deephtml@example.net', text: undefined, html }) });
  t.is(res.status, 200);
  const email = await waitForStatus(res.body.emailId, 'DELIVERED');
  t.false(email.emailEvents.some((e: any) => e.status === 'DELIVERY_DELAYED'), 'never deferred');
  const { raw, parsed, types } = await receivedBy('deephtml@example.net');
  t.is(await w.dkimStatus(raw), 'pass');
  t.false(types.includes('text/plain'), 'no text part');
  t.regex(String(parsed.html), /deep/);
});

test.serial('an attachment whose name maps to a multipart type in the extension table (backup.gzip) is delivered, not failed at composing', async (t) => {
  const before = w.sink.messages.length;
  const content = Buffer.from('gzip bytes').toString('base64');
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: 'alice@example.net', attachments: [{ filename: 'backup.gzip', content }] }) });
  t.is(res.status, 200);
  await waitForStatus(res.body.emailId, 'DELIVERED');
  const parsed = await simpleParser(w.sink.messages.slice(before)[0]!.raw);
  t.is(parsed.attachments[0]?.filename, 'backup.gzip');
  t.is(parsed.attachments[0]?.contentType, 'application/x-gzip');
  t.is(parsed.attachments[0]?.content.toString(), 'gzip bytes');
});
