import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { submissionTransport } from '../helpers/submission-client.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { rawSmtpSession } from '../inbound/helpers/smtp-client.js';

// What a key may submit over SMTP (docs/inbound.md, SMTP submission): the key is the one of the
// moment the message is taken, and a domain-bound key sends from its domain in whatever form the
// From is written, and from no other.

let w: MailWorld;

test.before(async () => {
  w = await startMailWorld();
});
test.after.always(async () => {
  await w?.close();
});

async function emailCount(): Promise<number> {
  return (await w.t0.request('GET', '/v1/emails?limit=100')).body.data.length;
}

/** AUTH, MAIL and RCPT on a STARTTLS session, up to the 354 of DATA. */
async function openData(token: string, from = 'hello@sender.dev') {
  const s = await rawSmtpSession(w.t0.app.listeners.submission!.port);
  await s.starttls();
  const auth = await s.command(`AUTH PLAIN ${Buffer.from(`\0apikey\0${token}`).toString('base64')}`);
  if (!auth.startsWith('235')) throw new Error(`AUTH: ${auth}`);
  const mail = await s.command(`MAIL FROM:<${from}>`);
  if (!mail.startsWith('250')) throw new Error(`MAIL: ${mail}`);
  await s.command('RCPT TO:<a@example.net>');
  const data = await s.command('DATA');
  if (!data.startsWith('354')) throw new Error(`DATA: ${data}`);
  return s;
}

const message = (from: string) => `From: ${from}\r\nTo: a@example.net\r\nSubject: scope\r\n\r\nbody\r\n.`;

test.serial('a key revoked while its message is on the wire (after MAIL FROM, before the end of DATA) is refused for that message, and nothing is stored', async (t) => {
  const key = await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 'revoked in DATA', permission: 'SENDING' });
  const before = await emailCount();
  const s = await openData(key.token);
  try {
    await w.t0.app.services.apiKeys.revoke(key.id, w.t0.teamId);
    const reply = await s.command(message('hello@sender.dev'));
    t.regex(reply, /^535 5\.7\.8 /);
  } finally {
    s.close();
  }
  t.is(await emailCount(), before);
});

test.serial('a domain-bound key whose domain is deleted while its message is on the wire is refused for that message', async (t) => {
  const domain = await addVerifiedDomain(w.t0, 'goes-away.dev');
  const key = await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 'bound, domain deleted in DATA', permission: 'SENDING', domainId: domain.id });
  const before = await emailCount();
  const s = await openData(key.token, 'hello@goes-away.dev');
  try {
    t.is((await w.t0.request('DELETE', `/v1/domains/${domain.id}`)).status, 200);
    const reply = await s.command(message('hello@goes-away.dev'));
    t.regex(reply, /^5\d\d /);
  } finally {
    s.close();
  }
  t.is(await emailCount(), before);
});

test.serial('a domain-bound key sends from its domain with a display name, in any case and, for an IDN, in Unicode or A-labels; never from a subdomain, another domain, or another domain dressed as its own in the display name', async (t) => {
  const bound = await addVerifiedDomain(w.t0, 'bücher-scope.dev');
  const key = await w.t0.app.services.apiKeys.create(w.t0.teamId, { name: 'bound idn', permission: 'SENDING', domainId: bound.id });
  const tx = submissionTransport(w.t0, key.token);
  try {
    for (const from of ['Shop <shop@bücher-scope.dev>', 'SHOP@BÜCHER-SCOPE.DEV', 'shop@xn--bcher-scope-thb.dev', '"Shop" <Shop@XN--BCHER-SCOPE-THB.DEV>']) {
      const info = await tx.sendMail({ envelope: { from: 'shop@xn--bcher-scope-thb.dev', to: ['a@example.net'] }, raw: `${message(from).slice(0, -1)}` });
      t.regex(info.response, /^250 2\.0\.0 Ok: queued as em_/, from);
    }
    for (const from of ['shop@sub.bücher-scope.dev', 'hello@sender.dev', '"shop@bücher-scope.dev" <hello@sender.dev>', 'hello@sender.dev.', 'shop@bücher-scope.dev.evil.test']) {
      const err = await tx.sendMail({ envelope: { from: 'shop@xn--bcher-scope-thb.dev', to: ['a@example.net'] }, raw: `${message(from).slice(0, -1)}` }).then(
        () => undefined,
        (e: { response?: string }) => e,
      );
      t.truthy(err, `${from} must be refused`);
      t.regex(err?.response ?? '', /^550 5\.[67]\.\d /, from);
    }
  } finally {
    tx.close();
  }
});
