import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { submissionTransport } from '../helpers/submission-client.js';

// A client whose 250 was lost (the connection cut after the commit, a timeout) sends the same
// message again: the same bytes from the same MAIL FROM to the same recipients. That resend is
// answered with the first email's id and sends nothing twice; a message that differs in any byte,
// or goes to other recipients, is another email.

let w: MailWorld;
test.before(async () => {
  w = await startMailWorld();
});
test.after.always(async () => {
  await w?.close();
});

const message = (subject: string) =>
  Buffer.from(
    [`From: Hello <hello@${'sender.dev'}>`, 'To: resend@example.org', `Subject: ${subject}`, 'Message-ID: <fixed-1@client.example>', 'Date: Sun, 29 Nov 2026 10:00:00 +0000', 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8', '', 'Body of the message.', ''].join('\r\n'),
  );

test.serial('a resent message (same bytes, envelope and key\'s team) is taken once; another message or other recipients are new emails', async (t) => {
  const tx = submissionTransport(w.t0);
  t.teardown(() => tx.close());
  const send = (raw: Buffer, to: string[] = ['resend@example.org']) => tx.sendMail({ envelope: { from: `hello@${w.domain.name}`, to }, raw });
  const raw = Buffer.from(message('Once').toString().replace('hello@sender.dev', `hello@${w.domain.name}`));
  const first = await send(raw);
  const again = await send(raw);
  const id = /queued as (em_\S+)/.exec(first.response)![1];
  t.regex(again.response, new RegExp(`queued as ${id}$`));
  const other = await send(Buffer.from(raw.toString().replace('Subject: Once', 'Subject: Twice')));
  t.notRegex(other.response, new RegExp(`queued as ${id}$`));
  const elsewhere = await send(raw, ['resend@example.org', 'second@example.org']);
  t.notRegex(elsewhere.response, new RegExp(`queued as ${id}$`));

  await w.settle();
  const once = w.sink.messages.filter((m) => m.raw.toString().includes('Subject: Once'));
  t.is(once.filter((m) => m.rcptTo.includes('resend@example.org')).length, 2, 'the first and the one to two recipients, not the resend');
});
