import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { submissionTransport } from '../helpers/submission-client.js';
import { rawSmtpSession } from '../inbound/helpers/smtp-client.js';

// The submission listener's limits, as a client that pushes them sees them: a configured
// recipient limit above what one send takes, and AUTH tried again and again on one connection.

let w: MailWorld;

test.before(async () => {
  // Above the 100 recipients one send takes (to, cc and bcc together).
  w = await startMailWorld({ overrides: { submission: { maxRecipients: 150 } } });
});
test.after.always(async () => {
  await w?.close();
});

test.serial('a recipient limit configured above what one send takes still answers 452 at RCPT beyond 100, and the message goes to the rest', async (t) => {
  const tx = submissionTransport(w.t0);
  const to = Array.from({ length: 101 }, (_, i) => `r${i}@example.org`);
  try {
    // RFC 5321 4.5.3.1.10: the recipient over the limit is refused at RCPT (452), so the client
    // sends it in another transaction, instead of every RCPT taken and the whole message refused.
    const info = await tx.sendMail({ from: 'hello@sender.dev', to, subject: 's', text: 't' });
    t.is(info.accepted.length, 100);
    t.deepEqual(info.rejected, ['r100@example.org']);
    t.regex(info.response, /^250 2\.0\.0 Ok: queued as em_/);
  } finally {
    tx.close();
  }
});

/** A client that upgrades with STARTTLS by hand and reads each reply. */
async function tlsSession(port: number) {
  const s = await rawSmtpSession(port);
  await s.starttls();
  return s;
}

test.serial('a connection that fails AUTH three times (PLAIN or LOGIN) is told 421 and closed; a good key afterwards needs a new connection', async (t) => {
  const s = await tlsSession(w.t0.app.listeners.submission!.port);
  try {
    const plain = (pass: string) => `AUTH PLAIN ${Buffer.from(`\0apikey\0${pass}`).toString('base64')}`;
    t.regex(await s.command(plain('ph_000000000000_notARealSecretAtAll0001')), /^535 5\.7\.8 /);
    // AUTH LOGIN (RFC 4954 and the LOGIN draft) counts the same.
    t.regex(await s.command('AUTH LOGIN'), /^334 /);
    t.regex(await s.command(Buffer.from('apikey').toString('base64')), /^334 /);
    t.regex(await s.command(Buffer.from('wrong').toString('base64')), /^535 5\.7\.8 /);
    // A new EHLO (a reset of the session) does not start the count again.
    t.regex(await s.command('EHLO client.test'), /^250/);
    t.regex(await s.command(plain('ph_000000000000_notARealSecretAtAll0003')), /^421 4\.7\.0 /);
    t.is(await s.command(plain(w.t0.key)), '(closed)', 'no more guesses on this connection');
  } finally {
    s.close();
  }
  // The limit is the connection's: a client with the right key is not held back.
  const ok = await submissionTransport(w.t0).sendMail({ from: 'hello@sender.dev', to: 'a@example.net', subject: 's', text: 't' });
  t.regex(ok.response, /^250 /);
});

test.serial('an empty password is told the password is an API key, in SMTP terms (not the API\'s Authorization header)', async (t) => {
  const s = await tlsSession(w.t0.app.listeners.submission!.port);
  try {
    const reply = await s.command(`AUTH PLAIN ${Buffer.from('\0apikey\0').toString('base64')}`);
    t.regex(reply, /^535 5\.7\.8 /);
    t.notRegex(reply, /Authorization|Bearer/);
    t.regex(reply, /API key/);
  } finally {
    s.close();
  }
});
