import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { createTransport } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { waitForStatus } from '../inbound/helpers/inbound-world.js';

// A reply submitted over SMTP keeps its own In-Reply-To and References (the engine writes them,
// DKIM-signed), so the recipient's client threads it; References stays bounded along a chain.

let w: MailWorld;
let port: number;
let ca: string;

test.before(async () => {
  w = await startMailWorld();
  port = w.t0.app.listeners.submission!.port;
  ca = readFileSync(join(w.t0.dataDir, 'tls', 'self-signed-cert.pem'), 'utf8');
});
test.after.always(async () => {
  await w?.close();
});

async function submitRaw(lines: string[], to: string): Promise<string> {
  const tx = createTransport({ host: '127.0.0.1', port, secure: false, requireTLS: true, tls: { ca, servername: 'mx.posthorn.test' }, auth: { user: 'apikey', pass: w.t0.key } } as SMTPTransport.Options);
  const raw = [
    'Message-ID: <client.1@laptop.example>',
    'Date: Mon, 1 Jan 2024 00:00:00 +0000',
    'From: Sender <hello@sender.dev>',
    `To: <${to}>`,
    'Subject: Re: Thread',
    ...lines,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Body',
    '',
  ].join('\r\n');
  try {
    const info = await tx.sendMail({ envelope: { from: 'hello@sender.dev', to: [to] }, raw: Buffer.from(raw, 'utf8') });
    return /queued as (em_\w+)/.exec(info.response)![1]!;
  } finally {
    tx.close();
  }
}

async function deliveredTo(emailId: string, to: string) {
  await waitForStatus(w, emailId, 'DELIVERED');
  const m = w.sink.messages.find((x) => x.rcptTo.includes(to))!;
  const text = m.raw.toString('latin1');
  const head = text.slice(0, text.indexOf('\r\n\r\n'));
  return { raw: m.raw, head, parsed: await simpleParser(m.raw) };
}

function refsOf(parsed: { references?: string | string[] }): string[] {
  return parsed.references === undefined ? [] : ([] as string[]).concat(parsed.references);
}

function legalLines(t: import('ava').ExecutionContext, head: string): void {
  for (const line of head.split('\r\n')) {
    t.regex(line, /^([ \t]|[!-9;-~]+:)/);
    t.true(Buffer.byteLength(line) <= 78 || !/^(References|In-Reply-To):/i.test(line), `folded: ${line.slice(0, 40)}`);
    t.true(Buffer.byteLength(line) <= 998);
  }
}

test.serial('a submitted reply keeps its In-Reply-To and References, folded, and DKIM-signed', async (t) => {
  const refs = ['<root.1@mail.example.org>', '<a.2@mail.example.org>', '<parent.3@mail.example.org>'];
  const emailId = await submitRaw(['In-Reply-To: <parent.3@mail.example.org>', `References: ${refs[0]}`, ` ${refs[1]}\t${refs[2]}`], 'reply1@example.net');
  const { raw, head, parsed } = await deliveredTo(emailId, 'reply1@example.net');
  t.is(parsed.inReplyTo, '<parent.3@mail.example.org>');
  t.deepEqual(refsOf(parsed), refs);
  t.not(parsed.messageId, '<client.1@laptop.example>', 'the Message-ID is still the engine\'s');
  t.is(head.match(/^In-Reply-To:/gim)?.length, 1);
  t.is(head.match(/^References:/gim)?.length, 1);
  const signed = /^DKIM-Signature:[^]*?\bh=([^;]*)/im.exec(head)![1]!.toLowerCase();
  t.regex(signed, /\bin-reply-to:/, 'both are signed');
  t.regex(signed, /\breferences:/);
  t.is(await w.dkimStatus(raw), 'pass');
  legalLines(t, head);
});

test.serial('junk In-Reply-To and References values are dropped, the valid msg-ids kept, and the message is sent', async (t) => {
  const long = `<${'x'.repeat(300)}@example.org>`;
  const emailId = await submitRaw(
    [
      'In-Reply-To: not a message id',
      `References: junk <ok.1@example.org> <bad id@example.org> <a@@b> <no-at-sign> ${long} (comment) <lit@[192.0.2.1]> <ok.1@example.org> <"quoted"@example.org> <dot.@example.org>`,
    ],
    'junk1@example.net',
  );
  const { raw, head, parsed } = await deliveredTo(emailId, 'junk1@example.net');
  t.is(parsed.inReplyTo, undefined);
  t.notRegex(head, /^In-Reply-To:/im);
  t.deepEqual(refsOf(parsed), ['<ok.1@example.org>', '<lit@[192.0.2.1]>']);
  t.is(await w.dkimStatus(raw), 'pass');
  legalLines(t, head);

  // Nothing valid at all: neither field is written.
  const none = await submitRaw(['In-Reply-To: <>', 'References: <a b> nonsense'], 'junk2@example.net');
  const got = await deliveredTo(none, 'junk2@example.net');
  t.notRegex(got.head, /^(In-Reply-To|References):/im);
});

test.serial('an API caller still gets 400 for In-Reply-To or References among its custom headers', async (t) => {
  for (const name of ['In-Reply-To', 'references', 'REFERENCES']) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { headers: { [name]: '<a@example.org>' } }) });
    t.is(res.status, 400, name);
    t.regex(String(res.body.error?.message), /set by Posthorn/);
  }
});

test.serial('a long submitted References keeps the first id and the most recent ones, at most 20', async (t) => {
  const ids = Array.from({ length: 45 }, (_, i) => `<m${i}.chain@example.org>`);
  const emailId = await submitRaw([`In-Reply-To: ${ids[44]}`, `References: ${ids.join(' ')}`], 'long1@example.net');
  const { raw, head, parsed } = await deliveredTo(emailId, 'long1@example.net');
  t.deepEqual(refsOf(parsed), [ids[0], ...ids.slice(45 - 19)]);
  t.is(await w.dkimStatus(raw), 'pass');
  legalLines(t, head);
});

test.serial('a chain of inReplyToId replies (from a submitted message on) keeps References bounded: the first id and the latest ones', async (t) => {
  const submittedRefs = ['<root@example.org>', '<r2@example.org>'];
  const first = await submitRaw([`In-Reply-To: ${submittedRefs[1]}`, `References: ${submittedRefs.join(' ')}`], 'chain0@example.net');
  const chain = [first];
  for (let i = 1; i <= 25; i++) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: i === 25 ? 'chain-last@example.net' : `chain${i}@example.net`, subject: 'Re: Chain', inReplyToId: chain[i - 1] }) });
    t.is(res.status, 200);
    chain.push(res.body.emailId);
  }
  const rows = await w.t0.app.store.db.selectFrom('emails').select(['id', 'message_id']).where('id', 'in', chain).execute();
  const mid = new Map(rows.map((r) => [r.id, r.message_id]));
  const messageIds = chain.map((id) => mid.get(id)!);

  // The second reply's References: the submitted ones, then the submitted message's own id.
  const second = await deliveredTo(chain[1]!, 'chain1@example.net');
  t.deepEqual(refsOf(second.parsed), [...submittedRefs, messageIds[0]]);

  const { raw, head, parsed } = await deliveredTo(chain[25]!, 'chain-last@example.net');
  t.is(parsed.inReplyTo, messageIds[24]);
  const full = [...submittedRefs, ...messageIds.slice(0, 25)];
  const refs = refsOf(parsed);
  t.is(refs.length, 20);
  t.deepEqual(refs, [full[0], ...full.slice(full.length - 19)]);
  t.is(await w.dkimStatus(raw), 'pass');
  legalLines(t, head);
});
