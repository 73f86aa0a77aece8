import test from 'ava';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { submissionTransport } from '../helpers/submission-client.js';
import { waitForStatus } from '../inbound/helpers/inbound-world.js';

// Submission with internationalised addresses: MAIL FROM at a sending domain named in Unicode,
// RCPT TO in Unicode or A-labels (SMTPUTF8); the suppression check goes by the A-label key.

let w: MailWorld;

test.before(async () => {
  w = await startMailWorld();
  await addVerifiedDomain(w.t0, 'Bücher.dev'); // added by its Unicode name: kept as xn--bcher-kva.dev
  w.addRecipientDomain('xn--lser-5qa.example');
});
test.after.always(async () => {
  await w?.close();
});

async function submit(from: string, to: string): Promise<string> {
  const tx = submissionTransport(w.t0);
  try {
    const info = await tx.sendMail({ from, to, subject: 'IDN', text: 'body', envelope: { from, to: [to] } });
    return /queued as (em_\S+)$/.exec(info.response)![1]!;
  } finally {
    tx.close();
  }
}

test.serial('MAIL FROM and RCPT TO in Unicode are taken and delivered to the A-label domain, DKIM-signed as it', async (t) => {
  const id = await submit('app@bücher.dev', 'Ute@LÖSER.example');
  await waitForStatus(w, id, 'DELIVERED');
  const copy = w.sink.messages.find((m) => m.raw.toString().includes(id))!;
  t.regex(copy.raw.toString(), /d=xn--bcher-kva\.dev;/);
  t.is(await w.dkimStatus(copy.raw), 'pass');
});

test.serial('RCPT TO of a suppressed mailbox, written in the other form, is suppressed', async (t) => {
  const add = await w.t0.request('POST', '/v1/suppressions', { body: { email: 'blocked@löser.example' } });
  t.true(add.status === 200 || add.status === 201, JSON.stringify(add.body));
  const id = await submit('app@xn--bcher-kva.dev', 'Blocked@XN--LSER-5QA.example');
  t.is((await waitForStatus(w, id, 'SUPPRESSED')).latestStatus, 'SUPPRESSED');
});
