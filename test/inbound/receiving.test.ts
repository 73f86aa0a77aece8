import test from 'ava';
import MailComposer from 'nodemailer/lib/mail-composer';
import type { BusEvent } from '../../src/core/events.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain, removeDkimRecord } from '../helpers/domain-fixtures.js';
import { dkimSignAs } from '../helpers/reporter-dkim.js';
import { twoTeams } from '../helpers/two-teams.js';
import { smtpSend } from './helpers/smtp-client.js';

// Mail for receiving domains: refused until receiving is on, stored before the 250 with
// SPF/DKIM/DMARC verdicts checked through the test zone, served by the API, announced as
// email.received, refused again the moment receiving is turned off.

let t0: TestApp;
let port: number;
let inbox: any;
let otherInbox: any;
const received: BusEvent[] = [];

// partner.com: a well-run sender (SPF for 127.0.0.1, DKIM, DMARC p=reject).
const PARTNER_SELECTOR = 'mail2026';

test.before(async () => {
  t0 = await startTestApp();
  port = t0.app.listeners.inbound!.port;
  inbox = await addVerifiedDomain(t0, 'inbox.dev');
  otherInbox = await addVerifiedDomain(t0, 'help-desk.dev');
  t0.zone.set('partner.com', 'TXT', ['v=spf1 ip4:127.0.0.1 -all']);
  t0.zone.set('_dmarc.partner.com', 'TXT', ['v=DMARC1; p=reject; rua=mailto:dmarc@partner.com']);
  // strict.com publishes SPF without us and DMARC p=reject: a forgery from here fails both.
  t0.zone.set('strict.com', 'TXT', ['v=spf1 ip4:192.0.2.0/24 -all']);
  t0.zone.set('_dmarc.strict.com', 'TXT', ['v=DMARC1; p=reject']);
  t0.app.services.events.on('email.received', (e) => {
    received.push(e);
  });
});
test.after.always(async () => {
  await t0?.close();
});

async function compose(opts: Record<string, unknown>): Promise<Buffer> {
  return new Promise((resolve, reject) => new MailComposer(opts).compile().build((err, msg) => (err ? reject(err) : resolve(msg))));
}

const signAsPartner = (message: Buffer) => dkimSignAs(t0.zone, 'partner.com', message, { selector: PARTNER_SELECTOR });

async function setReceiving(domain: any, on: boolean) {
  const res = await t0.request('PATCH', `/v1/domains/${domain.id}`, { body: { receiving: on } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
}

const queuedIds = (response: string) => (/queued as (.*)$/.exec(response)?.[1] ?? '').split(' ').filter((id) => id.startsWith('re_'));

test.serial('mail for a domain without receiving is refused at RCPT with 550 5.7.1', async (t) => {
  const res = await smtpSend({ port, from: 'news@partner.com', to: ['support@inbox.dev'], raw: 'Subject: hi\r\n\r\nhi\r\n' });
  t.false(res.ok);
  t.regex(res.rcptErrors[0] ?? res.response, /^550 5\.7\.1 /);
});

test.serial('with receiving on, a signed message is stored before the 250 with passing SPF, DKIM and DMARC', async (t) => {
  await setReceiving(inbox, true);
  const attachment = Buffer.from('%PDF-1.4 pretend invoice\n');
  const message = await signAsPartner(
    await compose({
      from: 'Partner News <news@partner.com>',
      to: 'Support <support@inbox.dev>',
      cc: 'billing@inbox.dev',
      replyTo: 'replies@partner.com',
      subject: 'Invoice 42 — überfällig',
      text: 'Please find the invoice attached.',
      html: '<p>Please find the <b>invoice</b> attached.</p>',
      messageId: '<invoice-42@partner.com>',
      headers: { 'X-Partner-Ref': 'INV-42' },
      attachments: [{ filename: 'invoice-42.pdf', content: attachment, contentType: 'application/pdf' }],
    }),
  );
  const res = await smtpSend({ port, from: 'bounce-42@partner.com', to: ['support@inbox.dev', 'billing@inbox.dev'], raw: message });
  t.true(res.ok, res.response);
  t.true(res.secure);
  const [id] = queuedIds(res.response);
  t.regex(id!, /^re_[A-Za-z0-9]{21}$/);

  const announced = received.find((e) => e.data.id === id);
  t.is(announced?.type, 'email.received');
  t.is(announced?.domainId, inbox.id);
  t.is(announced?.teamId, t0.teamId);

  const got = await t0.request('GET', `/v1/receivedEmails/${id}`);
  t.is(got.status, 200);
  const e = got.body;
  t.is(e.domainId, inbox.id);
  t.is(e.subject, 'Invoice 42 — überfällig');
  t.is(e.from, 'Partner News <news@partner.com>');
  t.deepEqual(e.to, ['Support <support@inbox.dev>']);
  t.deepEqual(e.cc, ['billing@inbox.dev']);
  t.deepEqual(e.replyTo, ['replies@partner.com']);
  t.is(e.messageId, '<invoice-42@partner.com>');
  t.deepEqual(e.envelope, { mailFrom: 'bounce-42@partner.com', rcptTo: ['support@inbox.dev', 'billing@inbox.dev'] });
  t.is(e.text.trim(), 'Please find the invoice attached.');
  t.is(e.html, '<p>Please find the <b>invoice</b> attached.</p>');
  t.is(e.headers.find((h: any) => h.name === 'X-Partner-Ref')?.value, 'INV-42');
  t.is(e.remote.ip, '127.0.0.1');
  t.is(e.remote.helo, 'mta.remote.test');
  t.true(e.remote.tls);

  // One assertion over the three verdicts, with the header's comments (mailauth's reasons) as
  // its message: a verdict that fails says which and why.
  const verdicts = { spf: e.authResults.spf.result, dkim: e.authResults.dkim.result, dmarc: e.authResults.dmarc.result };
  t.deepEqual(verdicts, { spf: 'pass', dkim: 'pass', dmarc: 'pass' }, e.authenticationResults);
  t.is(e.authResults.spf.domain, 'partner.com');
  t.like(e.authResults.dkim.signatures[0], { result: 'pass', domain: 'partner.com', selector: PARTNER_SELECTOR, aligned: true });
  t.is(e.authResults.dmarc.domain, 'partner.com');
  t.is(e.authResults.dmarc.policy, 'reject');
  t.regex(e.authenticationResults, /^Authentication-Results: mx\.posthorn\.test;/);

  t.is(e.attachmentCount, 1);
  t.like(e.attachments[0], { filename: 'invoice-42.pdf', contentType: 'application/pdf', size: attachment.length });
  t.is(Buffer.from(e.attachments[0].content, 'base64').toString(), attachment.toString());

  const raw = await fetch(`${t0.baseUrl}/v1/receivedEmails/${id}/raw`, { headers: { authorization: `Bearer ${t0.key}` } });
  t.is(raw.headers.get('content-type'), 'message/rfc822');
  // Someone else's bytes, from the API's origin: a download, never a page a browser renders.
  t.is(raw.headers.get('content-disposition'), `attachment; filename="${id}.eml"`);
  t.is(raw.headers.get('x-content-type-options'), 'nosniff');
  const bytes = Buffer.from(await raw.arrayBuffer());
  const text = bytes.toString();
  t.true(text.startsWith('Return-Path: <bounce-42@partner.com>\r\n'));
  t.regex(text, /\r\nAuthentication-Results: mx\.posthorn\.test;/);
  t.regex(text, /\r\nReceived: from mta\.remote\.test \(\[127\.0\.0\.1\]\)\r\n\tby mx\.posthorn\.test \(Posthorn\) with ESMTPS id /);
  t.true(bytes.subarray(bytes.length - message.length).equals(message), 'the message itself is stored byte for byte');
});

test.serial('a forgery fails SPF and DMARC and has no DKIM, and is stored all the same', async (t) => {
  const forged = await compose({ from: 'CEO <ceo@strict.com>', to: 'support@inbox.dev', subject: 'Urgent wire transfer', text: 'Pay now.' });
  const res = await smtpSend({ port, from: 'ceo@strict.com', to: ['support@inbox.dev'], raw: forged });
  t.true(res.ok, res.response);
  const got = await t0.request('GET', `/v1/receivedEmails/${queuedIds(res.response)[0]}`);
  t.is(got.body.authResults.spf.result, 'fail');
  t.is(got.body.authResults.dkim.result, 'none');
  t.deepEqual(got.body.authResults.dkim.signatures, []);
  t.is(got.body.authResults.dmarc.result, 'fail');
  t.is(got.body.authResults.dmarc.policy, 'reject');
});

test.serial('the list uses the page envelope, newest first; one message to two receiving domains is stored once for each', async (t) => {
  await setReceiving(otherInbox, true);
  const res = await smtpSend({ port, from: 'news@partner.com', to: ['a@inbox.dev', 'b@help-desk.dev'], raw: await compose({ from: 'news@partner.com', to: 'a@inbox.dev, b@help-desk.dev', subject: 'Both', text: 'x' }) });
  t.true(res.ok, res.response);
  const ids = queuedIds(res.response);
  t.is(ids.length, 2);

  const page = await t0.request('GET', '/v1/receivedEmails?limit=2');
  t.is(page.status, 200);
  t.deepEqual(Object.keys(page.body).sort(), ['hasMore', 'limit', 'page', 'receivedEmails', 'total', 'totalPage']);
  t.true(page.body.total >= 4);
  t.true(page.body.hasMore);
  t.is(page.body.receivedEmails.length, 2);
  t.false('text' in page.body.receivedEmails[0], 'list items stay small');
  const filtered = await t0.request('GET', `/v1/receivedEmails?domainId=${otherInbox.id}`);
  t.deepEqual(
    filtered.body.receivedEmails.map((r: any) => r.envelope.rcptTo),
    [['b@help-desk.dev']],
  );
});

test.serial('keys: SENDING is refused, a domain-bound key sees only its domain, another team sees nothing', async (t) => {
  const sending = await t0.app.services.apiKeys.create(t0.teamId, { name: 'sending', permission: 'SENDING' });
  t.is((await t0.request('GET', '/v1/receivedEmails', { key: sending.token })).status, 403);

  const bound = await t0.app.services.apiKeys.create(t0.teamId, { name: 'bound', permission: 'FULL', domainId: otherInbox.id });
  const list = await t0.request('GET', '/v1/receivedEmails', { key: bound.token });
  t.is(list.status, 200);
  t.true(list.body.receivedEmails.length > 0);
  t.true(list.body.receivedEmails.every((r: any) => r.domainId === otherInbox.id));
  const inboxMail = (await t0.request('GET', `/v1/receivedEmails?domainId=${inbox.id}`)).body.receivedEmails[0];
  t.is((await t0.request('GET', `/v1/receivedEmails/${inboxMail.id}`, { key: bound.token })).status, 404);
  t.is((await t0.request('GET', `/v1/receivedEmails/${inboxMail.id}/raw`, { key: bound.token })).status, 404);
  t.is((await t0.request('GET', `/v1/receivedEmails?domainId=${inbox.id}`, { key: bound.token })).body.total, 0);

  const stranger = (await twoTeams(t0)).b.key;
  t.is((await t0.request('GET', '/v1/receivedEmails', { key: stranger })).body.total, 0);
  t.is((await t0.request('GET', `/v1/receivedEmails/${inboxMail.id}`, { key: stranger })).status, 404);
  t.is((await t0.request('GET', '/v1/receivedEmails/re_doesnotexist', {})).status, 404);
  t.is((await t0.request('GET', '/v1/receivedEmails?limit=1000')).status, 400);
  t.is((await t0.request('GET', '/v1/receivedEmails?domainId=abc')).status, 400);
});

test.serial('turning receiving off refuses the domain at once', async (t) => {
  await setReceiving(inbox, false);
  const res = await smtpSend({ port, from: 'news@partner.com', to: ['support@inbox.dev'], raw: 'Subject: hi\r\n\r\nhi\r\n' });
  t.false(res.ok);
  t.regex(res.rcptErrors[0] ?? res.response, /^550 5\.7\.1 /);
  // The other domain still receives.
  t.true((await smtpSend({ port, from: 'news@partner.com', to: ['b@help-desk.dev'], raw: 'Subject: hi\r\n\r\nhi\r\n' })).ok);
});

test.serial('a domain name that changed teams: only the team that verified it now receives its mail, not the team that lost it', async (t) => {
  // Team A verified the name and turned receiving on; the name then passed to team B, which
  // published its own DKIM key (at its own selector's host) while A's was taken down. A's
  // re-check finds its records gone.
  const before = await addVerifiedDomain(t0, 'handover.dev');
  await setReceiving(before, true);
  const { b } = await twoTeams(t0, { b: { name: 'New owner', domains: ['handover.dev'] } });
  const [keyB, after] = [b.key, b.domains[0]!];
  removeDkimRecord(t0, before);
  t.is((await t0.request('PATCH', `/v1/domains/${after.id}`, { key: keyB, body: { receiving: true } })).status, 200);
  await t0.request('PUT', `/v1/domains/${before.id}/verify`);
  t.not((await t0.request('GET', `/v1/domains/${before.id}`)).body.status, 'SUCCESS');

  const res = await smtpSend({ port, from: 'news@partner.com', to: ['reset@handover.dev'], raw: 'Subject: your password reset\r\n\r\nsecret\r\n' });
  t.true(res.ok, res.response);
  const mine = await t0.request('GET', `/v1/receivedEmails?domainId=${after.id}`, { key: keyB });
  t.is(mine.body.total, 1);
  const theirs = await t0.request('GET', `/v1/receivedEmails?domainId=${before.id}`);
  t.is(theirs.body.total, 0, 'the team that lost the name gets no copy');
});

test.serial('an unpaired surrogate decoded from a UTF-16 encoded word is stored as U+FFFD, in every field and its JSON, on either store', async (t) => {
  await setReceiving(inbox, true);
  // A high surrogate, then "A": UTF-16 text no character can be made of.
  const lone = `=?UTF-16LE?B?${Buffer.from([0x00, 0xd8, 0x41, 0x00]).toString('base64')}?=`;
  const message = Buffer.from(
    [
      `From: ${lone} <eve@strict.com>`,
      `To: ${lone} <support@inbox.dev>`,
      `Subject: ${lone}`,
      'Message-ID: <surrogate-1@strict.com>',
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="b1"',
      '',
      '--b1',
      'Content-Type: text/plain; charset=utf-8',
      '',
      'hello',
      '--b1',
      `Content-Type: application/octet-stream; name="${lone}"`,
      `Content-Disposition: attachment; filename="${lone}"`,
      'Content-Transfer-Encoding: base64',
      '',
      Buffer.from([1, 2]).toString('base64'),
      '--b1--',
      '',
    ].join('\r\n'),
  );
  const res = await smtpSend({ port, from: 'eve@strict.com', to: ['support@inbox.dev'], raw: message });
  t.true(res.ok, res.response);
  const got = await t0.request('GET', `/v1/receivedEmails/${queuedIds(res.response)[0]}`);
  t.is(got.status, 200);
  const e = got.body;
  t.is(e.subject, '\uFFFDA');
  t.is(e.from, '"\uFFFDA" <eve@strict.com>');
  t.deepEqual(e.to, ['"\uFFFDA" <support@inbox.dev>']);
  t.is(e.attachments[0].filename, '\uFFFDA');
  // The answer's JSON carries no surrogate escape a strict reader (or PostgreSQL's jsonb) refuses.
  t.false(/\\ud[89a-f]/i.test(JSON.stringify(e)));
});

test.serial('NUL characters in a received message (encoded in its headers or raw in its body) are stored as U+FFFD, on either store, and the raw message byte for byte', async (t) => {
  await setReceiving(inbox, true);
  const nulB64 = (text: string) => `=?utf-8?B?${Buffer.from(text).toString('base64')}?=`;
  const message = Buffer.from(
    [
      `From: ${nulB64('Ev\0e')} <eve@strict.com>`,
      'To: support@inbox.dev',
      `Subject: ${nulB64('a\0b')}`,
      'X-Odd: one\0two',
      'Message-ID: <nul-1@strict.com>',
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="b1"',
      '',
      '--b1',
      'Content-Type: text/plain; charset=utf-8',
      '',
      'line\0one',
      '--b1',
      'Content-Type: text/html; charset=utf-8',
      '',
      '<p>x\0y</p>',
      '--b1',
      `Content-Type: application/octet-stream; name="${nulB64('f\0.bin')}"`,
      `Content-Disposition: attachment; filename="${nulB64('f\0.bin')}"`,
      'Content-Transfer-Encoding: base64',
      '',
      Buffer.from([0, 1, 2]).toString('base64'),
      '--b1--',
      '',
    ].join('\r\n'),
  );
  const res = await smtpSend({ port, from: 'eve@strict.com', to: ['support@inbox.dev'], raw: message });
  t.true(res.ok, res.response);
  const got = await t0.request('GET', `/v1/receivedEmails/${queuedIds(res.response)[0]}`);
  t.is(got.status, 200);
  const e = got.body;
  t.is(e.subject, 'a\uFFFDb');
  t.is(e.from, '"Ev\uFFFDe" <eve@strict.com>');
  t.is(e.headers.find((h: any) => h.name === 'X-Odd')?.value, 'one\uFFFDtwo');
  t.regex(e.text, /^line\uFFFDone/);
  t.regex(e.html, /x\uFFFDy/);
  t.is(e.attachments[0].filename, 'f\uFFFD.bin');
  t.deepEqual([...Buffer.from(e.attachments[0].content, 'base64')], [0, 1, 2], 'attachment content is bytes, kept as they are');
  const raw = await fetch(`${t0.baseUrl}/v1/receivedEmails/${e.id}/raw`, { headers: { authorization: `Bearer ${t0.key}` } });
  const bytes = Buffer.from(await raw.arrayBuffer());
  t.true(bytes.subarray(bytes.length - message.length).equals(message), 'the message itself is stored byte for byte');
});
