import test from 'ava';
import { simpleParser } from 'mailparser';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';

// A caller's data in every header a send writes, through the API and the engine to the sink:
// line breaks, bare CR, U+2028/U+2029, NEL, controls, quotes and header-looking text must stay
// inside the field they were given for. Each delivered message holds exactly the fields meant,
// no recipient beyond the envelope's, no Bcc, lines within 998 octets, and a DKIM signature
// that verifies.

let w: MailWorld;
test.before(async () => {
  w = await startMailWorld();
});
test.after.always(async () => {
  await w?.close();
});

async function delivered(id: string, count: number) {
  for (let i = 0; i < 50; i++) {
    await w.settle();
    const res = await w.t0.request('GET', `/v1/emails/${id}`);
    if (res.body.latestStatus === 'DELIVERED') break;
  }
  await w.sink.waitForMessages(1);
  const got = w.sink.messages.filter((m) => m.raw.toString('latin1').includes(`X-Posthorn-Email-ID: ${id}`));
  if (got.length !== count) throw new Error(`email ${id}: ${got.length} messages at the sink, ${count} expected`);
  return got;
}

/** The header block's lines: every one a field or a fold, none over 998 octets. */
function headLines(t: import('ava').ExecutionContext, raw: Buffer): string {
  const text = raw.toString('latin1');
  const head = text.slice(0, text.indexOf('\r\n\r\n'));
  for (const line of head.split('\r\n')) {
    t.regex(line, /^([ \t]|[!-9;-~]+:)/, JSON.stringify(line.slice(0, 80)));
    t.true(line.length <= 998);
  }
  return head;
}

const NASTY = 'a\u2028X-Injected: 1\u2029X-Injected: 2\u0085X-Injected: 3\u000bX-Injected: 4\rX-Injected: 5 "q" ;=\\';

for (const path of ['/v1/emails', '/api/v1/emails']) {
  test.serial(`${path}: subject, display names, custom headers and file names carrying line separators and header text stay in their field; Bcc is envelope only`, async (t) => {
    const res = await w.t0.request('POST', path, {
      body: sendBody(w, {
        from: `"Sender ${NASTY.replace(/["\\\r]/g, '')}" <hello@${w.domain.name}>`,
        to: [`"Alice ${NASTY.replace(/["\\\r]/g, '')}" <alice@example.net>`],
        cc: 'carol@example.org',
        bcc: ['Hidden <hidden@example.net>'],
        replyTo: `"Reply ${NASTY.replace(/["\\\r]/g, '')}" <replies@${w.domain.name}>`,
        subject: `Hi ${NASTY}`,
        headers: { 'X-Note': NASTY.replace(/\r/g, ''), 'X-Long': 'word '.repeat(700).trim() },
        attachments: [{ filename: `r"e;p=o\u2028X-Injected: 6.txt`, content: Buffer.from('x').toString('base64') }],
      }),
    });
    t.is(res.status, 200, JSON.stringify(res.body));
    const msgs = await delivered(res.body.emailId, 3);
    t.deepEqual(msgs.map((m) => m.rcptTo).flat().sort(), ['alice@example.net', 'carol@example.org', 'hidden@example.net']);
    for (const m of msgs) {
      const head = headLines(t, m.raw);
      t.notRegex(head, /^(Bcc|X-Injected):/im);
      t.notRegex(m.raw.toString('latin1'), /hidden@example\.net/);
      for (const field of ['From', 'To', 'Cc', 'Reply-To', 'Subject', 'X-Note']) t.is(head.match(new RegExp(`^${field}:`, 'gim'))?.length, 1, field);
      t.is(await w.dkimStatus(m.raw), 'pass');
      const parsed = await simpleParser(m.raw);
      t.is(parsed.subject, `Hi ${NASTY.replace('\r', ' ')}`);
      t.is(parsed.bcc, undefined);
      t.is(parsed.attachments.length, 1);
      t.is(parsed.attachments[0]!.filename, `r"e;p=o\u2028X-Injected: 6.txt`);
    }
  });
}

test.serial('a batch: each item keeps its own headers, none leaks into another', async (t) => {
  const res = await w.t0.request('POST', '/v1/emails/batch', {
    body: [
      sendBody(w, { to: 'b1@example.net', subject: 'One\r\nX-Injected: 1', headers: { 'X-Item': 'one' } }),
      sendBody(w, { to: 'b2@example.net', subject: 'Two', headers: { 'X-Item': 'two\u2028X-Injected: 2' } }),
    ],
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  const ids = (res.body.data as { emailId: string }[]).map((d) => d.emailId);
  for (const [i, id] of ids.entries()) {
    const [m] = await delivered(id, 1);
    const head = headLines(t, m!.raw);
    t.notRegex(head, /^X-Injected:/im);
    t.is(head.match(/^X-Item:/gim)?.length, 1);
    t.is(await w.dkimStatus(m!.raw), 'pass');
    const parsed = await simpleParser(m!.raw);
    t.is(parsed.subject, i === 0 ? 'One X-Injected: 1' : 'Two');
  }
});

test('custom headers: a blank value, or one name given twice in two casings, is 400 naming it; every case of an engine-owned name is refused', async (t) => {
  for (const [headers, message] of [
    [{ 'X-Blank': ' \t ' }, /^headers\.X-Blank: must not be blank/],
    [{ 'X-Dup': '1', 'x-dup': '2' }, /^headers\.x-dup: the same header as X-Dup/],
    [{ 'lIsT-uNsUbScRiBe': '<https://x.example>' }, /^headers\.lIsT-uNsUbScRiBe: .*set by Posthorn/],
    [{ 'x-posthorn-email-id': 'em_forged' }, /set by Posthorn/],
    [{ BCC: 'x@evil.example' }, /set by Posthorn/],
    [{ 'X-A:B': 'x' }, /not a valid header name/],
    [{ 'X A': 'x' }, /not a valid header name/],
    [{ 'X-Ä': 'x' }, /not a valid header name/],
    [{ 'X-Nul': 'a\u0000b' }, /NUL|headers/],
  ] as const) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { headers }) });
    t.is(res.status, 400, JSON.stringify(headers));
    t.regex(String(res.body.error?.message), message, JSON.stringify(headers));
  }
});
