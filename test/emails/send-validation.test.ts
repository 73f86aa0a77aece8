import test from 'ava';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { twoTeams } from '../helpers/two-teams.js';

let w: MailWorld;
test.before(async () => {
  w = await startMailWorld();
  const res = await w.t0.request('POST', '/v1/domains', { body: { name: 'unverified-order.dev', region: 'r' } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
});
test.after.always(async () => {
  await w?.close();
});

const b64 = Buffer.from('x').toString('base64');

const badBodies: [string, Record<string, unknown>, RegExp][] = [
  // As a missing from is: the obvious mistake gets the plain words, not the accepted forms.
  ['missing to', { to: undefined }, /^to: is required$/],
  ['empty to list', { to: [] }, /to/],
  ['bad recipient', { to: 'not-an-address' }, /to/],
  ['two addresses in one string', { to: 'a@example.net, b@example.net' }, /to/],
  ['group syntax (an unquoted colon) in a display name', { to: 'Alice\u2028X-Inj: 1 <alice@example.net>' }, /^to: .* is not a single valid email address/s],
  ['missing from', { from: undefined }, /from/],
  ['bad from', { from: 'nobody' }, /from/],
  ['missing subject', { subject: undefined }, /subject/],
  ['empty subject', { subject: '' }, /subject/],
  ['no body', { text: undefined }, /text or html/],
  ['empty html', { text: undefined, html: '' }, /html/],
  ['CRLF in header value', { headers: { 'X-A': 'a\r\nBcc: evil@example.com' } }, /headers/],
  ['CR/LF in header name', { headers: { 'X-A\r\nBcc': 'x' } }, /header/],
  ['engine-owned header', { headers: { 'Message-ID': '<x@y>' } }, /Message-ID/],
  // Results only a receiver or an intermediary writes (RFC 8601, RFC 8617, RFC 7208 9.1), as Received is.
  ['forged Authentication-Results', { headers: { 'Authentication-Results': 'mx.example.net; dkim=pass; spf=pass; dmarc=pass' } }, /^headers\.Authentication-Results: .*set by Posthorn/],
  ['forged ARC-Seal', { headers: { 'arc-seal': 'i=1; a=rsa-sha256; cv=none; d=example.net' } }, /^headers\.arc-seal: /],
  ['forged Received-SPF', { headers: { 'Received-SPF': 'pass' } }, /^headers\.Received-SPF: /],
  // Written by the final delivery agent (RFC 9228); a forged Delivered-To makes Postfix bounce the mail as a loop.
  ['forged Delivered-To', { headers: { 'Delivered-To': 'alice@example.net' } }, /^headers\.Delivered-To: .*set by Posthorn/],
  ['forged X-Original-To', { headers: { 'x-original-to': 'alice@example.net' } }, /^headers\.x-original-to: /],
  // A resent block (RFC 5322 3.6.6) on a fresh message: Resent-From/Resent-Sender could name another domain's sender.
  ['forged Resent-From', { headers: { 'Resent-From': 'ceo@bank.example' } }, /^headers\.Resent-From: .*set by Posthorn/],
  ['empty header value', { headers: { 'X-A': '' } }, /headers/],
  ['11 attachments', { attachments: Array.from({ length: 11 }, (_, i) => ({ filename: `f${i}.txt`, content: b64 })) }, /attachments/],
  ['bad base64', { attachments: [{ filename: 'f.txt', content: 'not base64!!' }] }, /base64/],
  ['attachment without filename', { attachments: [{ content: b64 }] }, /filename/],
  // Whitespace only is no content, as "" is: both the same words.
  ['empty attachment', { attachments: [{ filename: 'f.txt', content: '' }] }, /^attachments\[0\]\.content: must not be empty$/],
  ['whitespace-only attachment', { attachments: [{ filename: 'f.txt', content: '  \r\n ' }] }, /^attachments\[0\]\.content: must not be empty$/],
  // An A-label that is no punycode of a valid IDN: no DNS name, so the mail could only bounce.
  ['to with an invalid A-label', { to: 'x@xn--zz.example' }, /^to: "x@xn--zz\.example" is not a valid email address/],
  ['cc with an invalid A-label', { cc: ['a@example.net', 'Bob <b@XN--ZZ.example>'] }, /^cc\[1\]: /],
  ['bcc with an A-label decoding to ASCII', { bcc: 'b@xn--abc-.example' }, /^bcc: /],
  ['replyTo with an invalid A-label', { replyTo: 'r@mail.xn--a.example' }, /^replyTo: /],
  ['from with an invalid A-label', { from: 'Sender <hello@xn--zz.example>' }, /^from: /],
  ['11 tags', { tags: Array.from({ length: 11 }, (_, i) => `t${i}`) }, /tags/],
  ['65-char tag', { tags: ['x'.repeat(65)] }, /tags/],
  ['empty tag', { tags: [''] }, /tags/],
  ['1,001 variables', { variables: Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`v${i}`, 'x'])) }, /variables: at most 1000 variables/],
  ['unparseable scheduledAt', { scheduledAt: 'when pigs fly' }, /scheduledAt/],
  // chrono finds a time inside any text; the whole text must be the time.
  ['scheduledAt with words around a time', { scheduledAt: 'not tomorrow' }, /scheduledAt: "not tomorrow" is not/],
  ['scheduledAt with an impossible hour', { scheduledAt: 'tomorrow at 25:00' }, /scheduledAt/],
  ['scheduledAt naming two times', { scheduledAt: 'monday or friday' }, /scheduledAt/],
  ['scheduledAt on a day that does not exist', { scheduledAt: '2027-02-30T00:00:00Z' }, /scheduledAt/],
  ['scheduledAt past the year 9999', { scheduledAt: 'in 10000 years' }, /before the year 10000/],
  ['scheduledAt past the year 9999 by its offset', { scheduledAt: '9999-12-31T23:59:59-14:00' }, /before the year 10000/],
  ['a header named __proto__ (would be dropped silently)', { headers: JSON.parse('{"__proto__":"x"}') }, /__proto__/],
  ['101 recipients in to', { to: Array.from({ length: 101 }, (_, i) => `r${i}@example.net`) }, /^to: must be an address or a list of at most 100 addresses/],
  ['past scheduledAt', { scheduledAt: '2001-01-01T00:00:00Z' }, /past/],
  ['wrong type', { subject: 42 }, /subject/],
  ['unknown template', { templateId: 'tp_nope', subject: undefined, text: undefined }, /template/],
];

for (const [name, extra, message] of badBodies) {
  test(`400: ${name}`, async (t) => {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, extra) });
    t.is(res.status, 400, JSON.stringify(res.body));
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, message);
  });
}

// The body is validated whole before the sender's domain is looked at: from a domain that is
// not verified (or not the team's at all), a bad field is still the 400 that names it.
for (const [name, extra, message] of badBodies) {
  if ('from' in extra) continue; // these name the from field itself
  for (const from of ['Sender <hello@unverified-order.dev>', 'hello@not-this-teams.dev']) {
    test(`400 before 403 (${from.includes('unverified') ? 'unverified domain' : "another team's domain"}): ${name}`, async (t) => {
      const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { from, ...extra }) });
      t.is(res.status, 400, JSON.stringify(res.body));
      t.regex(res.body.error.message, message);
    });
  }
}

test('400 before 403 in a batch too: the bad item is named, from an unverified domain', async (t) => {
  const res = await w.t0.request('POST', '/v1/emails/batch', { body: [sendBody(w), sendBody(w, { from: 'a@unverified-order.dev', to: 'not-an-address' })] });
  t.is(res.status, 400, JSON.stringify(res.body));
  t.regex(res.body.error.message, /^\[1\]\.to: /);
});

// Every field of a resent block (RFC 5322 3.6.6), and any other resent-* name, in any casing, on
// each path that takes custom headers; a domain-bound key included, whose Resent-From would name
// another domain's sender.
test('every Resent-* header is refused with 400, through /v1 and /api/v1, single and batch, for a domain-bound key too', async (t) => {
  const bound = (await w.t0.request('POST', '/v1/apiKeys', { body: { name: 'bound-resent', permission: 'SENDING', domainId: w.domain.id } })).body.token;
  const names = ['Resent-From', 'resent-sender', 'RESENT-TO', 'Resent-Cc', 'Resent-Bcc', 'Resent-Date', 'Resent-Message-ID', 'rEsEnT-Reply-To', 'Resent-X'];
  for (const name of names) {
    const headers = { 'X-Ok': '1', [name]: name.toLowerCase().endsWith('date') ? 'Mon, 1 Jan 2001 00:00:00 +0000' : 'ceo@bank.example' };
    for (const prefix of ['/v1', '/api/v1']) {
      for (const key of [undefined, bound]) {
        const one = await w.t0.request('POST', `${prefix}/emails`, { key, body: sendBody(w, { headers }) });
        t.is(one.status, 400, `${prefix} ${name} ${JSON.stringify(one.body)}`);
        t.is(one.body.error?.message, `headers.${name}: this header is set by Posthorn and cannot be overridden`);
        const batch = await w.t0.request('POST', `${prefix}/emails/batch`, { key, body: [sendBody(w), sendBody(w, { headers })] });
        t.is(batch.status, 400, `${prefix} batch ${name}`);
        t.is(batch.body.error?.message, `[1].headers.${name}: this header is set by Posthorn and cannot be overridden`);
      }
    }
  }
  // A name that only starts like one is an ordinary header.
  const ok = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { headers: { 'X-Resent-From': 'a', Resentful: 'b' }, scheduledAt: '2030-01-01T00:00:00Z' }) });
  t.is(ok.status, 200, JSON.stringify(ok.body));
  await w.t0.request('POST', `/v1/emails/${ok.body.emailId}/cancel`);
});

test('a scheduledAt years ahead is accepted (the spec sets no limit), with filler words around a plain-English time', async (t) => {
  const far = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { scheduledAt: '2030-01-01T00:00:00Z' }) });
  t.is(far.status, 200, JSON.stringify(far.body));
  const noon = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { scheduledAt: 'at noon tomorrow' }) });
  t.is(noon.status, 200, JSON.stringify(noon.body));
  const e = (await w.t0.request('GET', `/v1/emails/${noon.body.emailId}`)).body;
  t.is(new Date(e.scheduledAt).getHours(), 12);
  for (const id of [far.body.emailId, noon.body.emailId]) await w.t0.request('POST', `/v1/emails/${id}/cancel`);
});

test('a body with a Content-Encoding other than identity is 400, not read as malformed JSON', async (t) => {
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w), headers: { 'content-encoding': 'gzip' } });
  t.is(res.status, 400);
  t.regex(res.body.error.message, /Content-Encoding gzip is not supported/);
  t.is((await w.t0.request('POST', '/v1/emails', { body: sendBody(w), headers: { 'content-encoding': 'identity' } })).status, 200);
  // A large one too: the unread body is discarded, so the answer is not lost to a reset.
  const large = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { text: 'x'.repeat(5_000_000) }), headers: { 'content-encoding': 'br' } });
  t.is(large.status, 400);
});

test('a non-object body is 400', async (t) => {
  for (const raw of ['[]', '"x"', 'null', '42']) {
    const res = await w.t0.request('POST', '/v1/emails', { rawBody: raw });
    t.is(res.status, 400, raw);
  }
});

test('403 for a from-domain that is not verified, not the team\'s, or outside the key\'s domain', async (t) => {
  const unverified = await w.t0.request('POST', '/v1/domains', { body: { name: 'unverified.dev', region: 'r' } });
  let res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { from: 'a@unverified.dev' }) });
  t.is(res.status, 403);
  t.is(res.body.error.code, 'FORBIDDEN');
  res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { from: 'a@stranger.dev' }) });
  t.is(res.status, 403);
  const bound = (await w.t0.request('POST', '/v1/apiKeys', { body: { name: 'bound', permission: 'SENDING', domainId: unverified.body.id } })).body.token;
  res = await w.t0.request('POST', '/v1/emails', { key: bound, body: sendBody(w) });
  t.is(res.status, 403);
  t.regex(res.body.error.message, /only send from domain/);
  const otherKey = (await twoTeams(w.t0)).b.key;
  res = await w.t0.request('POST', '/v1/emails', { key: otherKey, body: sendBody(w) });
  t.is(res.status, 403);
});

test('a SENDING key may send and read emails but not manage domains', async (t) => {
  const key = (await w.t0.request('POST', '/v1/apiKeys', { body: { name: 'sender', permission: 'SENDING' } })).body.token;
  const sent = await w.t0.request('POST', '/v1/emails', { key, body: sendBody(w) });
  t.is(sent.status, 200);
  t.is((await w.t0.request('GET', `/v1/emails/${sent.body.emailId}`, { key })).status, 200);
  t.is((await w.t0.request('GET', '/v1/domains', { key })).status, 403);
});

// Serial: it counts the team's emails before and after a rejected batch, which a concurrent send would move.
test.serial('batch: 1..100 items, ids in input order, one rate-limit request, all-or-nothing validation', async (t) => {
  const items = Array.from({ length: 5 }, (_, i) => sendBody(w, { subject: `batch ${i}` }));
  const res = await w.t0.request('POST', '/v1/emails/batch', { body: items });
  t.is(res.status, 200);
  t.is(res.body.data.length, 5);
  for (let i = 0; i < 5; i++) {
    const e = (await w.t0.request('GET', `/v1/emails/${res.body.data[i].emailId}`)).body;
    t.is(e.subject, `batch ${i}`);
  }
  t.is((await w.t0.request('POST', '/v1/emails/batch', { body: [] })).status, 400);
  const tooMany = await w.t0.request('POST', '/v1/emails/batch', { body: Array.from({ length: 101 }, () => sendBody(w)) });
  t.is(tooMany.status, 400);
  const listBefore = (await w.t0.request('GET', '/v1/emails?limit=1')).body.count;
  const oneBad = await w.t0.request('POST', '/v1/emails/batch', { body: [sendBody(w), sendBody(w, { to: 'bad' })] });
  t.is(oneBad.status, 400);
  t.regex(oneBad.body.error.message, /\[1\]\.to/);
  t.is((await w.t0.request('GET', '/v1/emails?limit=1')).body.count, listBefore, 'nothing of a rejected batch was stored');
  t.is((await w.t0.request('POST', '/v1/emails/batch', { body: { not: 'an array' } })).status, 400);
});

test('a batch of 100 counts as one request for the rate limit', async (t) => {
  const team = await w.t0.app.services.teams.create('Limited', 2);
  const key = (await w.t0.app.services.apiKeys.create(team, { name: 'k' })).token;
  // This team has no verified domain: the batch is refused with 403, but it still counts once.
  const res = await w.t0.request('POST', '/v1/emails/batch', { key, body: Array.from({ length: 100 }, () => sendBody(w)) });
  t.is(res.status, 403);
  t.is(res.headers.get('x-ratelimit-remaining'), '1');
});

test('emails list: data and count, page and limit, tag AND filter, domainId filter, dates', async (t) => {
  const tagA = `a-${Date.now()}`;
  const tagB = `b-${Date.now()}`;
  await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { tags: [tagA] }) });
  await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { tags: [tagA, tagB] }) });
  await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { tags: [tagB] }) });
  const one = await w.t0.request('GET', `/v1/emails?tag=${tagA}`);
  t.is(one.body.count, 2);
  const both = await w.t0.request('GET', `/v1/emails?tag=${tagA}&tag=${tagB}`);
  t.is(both.body.count, 1);
  t.deepEqual(both.body.data[0].tags.sort(), [tagA, tagB].sort());
  const item = both.body.data[0];
  for (const k of ['id', 'to', 'replyTo', 'cc', 'bcc', 'from', 'subject', 'html', 'text', 'latestStatus', 'scheduledAt', 'domainId', 'createdAt', 'updatedAt']) t.true(k in item, k);
  const paged = await w.t0.request('GET', '/v1/emails?limit=1&page=2');
  t.is(paged.body.data.length, 1);
  t.true(paged.body.count >= 3);
  t.is((await w.t0.request('GET', `/v1/emails?domainId=${w.domain.id}&tag=${tagA}`)).body.count, 2);
  t.is((await w.t0.request('GET', `/v1/emails?domainId=999999&tag=${tagA}`)).body.count, 0);
  t.is((await w.t0.request('GET', `/v1/emails?startDate=2999-01-01T00:00:00Z`)).body.count, 0);
  t.is((await w.t0.request('GET', '/v1/emails?startDate=yesterday-ish')).status, 400);
  // Date.parse would read these (as 2001-01-01, as this year's Nov 25, as March 2).
  for (const bad of ['startDate=1', 'startDate=Nov%2025', 'endDate=2026-02-30T00:00:00Z', 'endDate=2026-11-25T24:00:00Z']) {
    const res = await w.t0.request('GET', `/v1/emails?${bad}`);
    t.is(res.status, 400, bad);
    t.regex(res.body.error.message, /must be an ISO 8601 date-time/);
  }
  t.is((await w.t0.request('GET', '/v1/emails?startDate=2026-01-01&endDate=2999-01-01T00:00:00%2B02:00')).status, 200);
  t.is((await w.t0.request('GET', '/v1/emails?limit=101')).status, 400);
  t.is((await w.t0.request('GET', '/v1/emails?domainId=abc')).status, 400);
  t.is((await w.t0.request('GET', '/v1/emails/xy')).status, 400);
  t.is((await w.t0.request('GET', '/v1/emails/em_missing')).status, 404);
});

test('header values that can never be folded into legal lines are 400, not a delivery failure later', async (t) => {
  const long = 'x'.repeat(1000);
  for (const extra of [{ subject: long }, { from: `${long} <a@${w.domain.name}>` }, { headers: { 'X-Long': long } }, { headers: { 'Content-ID': '<x@y>' } }]) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, extra) });
    t.is(res.status, 400, JSON.stringify(extra).slice(0, 60));
  }
  const spaced = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { subject: 'word '.repeat(150) }) });
  t.is(spaced.status, 200);
});

test('a display name whose written form is an unbroken run too long for a line is 400 in every address field, not a delivery failure later', async (t) => {
  // 600 backslashes are a 600-character name within the 1000-character field, but the header
  // writes each one escaped (RFC 5322 3.2.4): a 1200-octet quoted-string no fold can break.
  const name = `${'\\'.repeat(600)} <b@example.net>`;
  for (const [field, value] of [['from', `${'\\'.repeat(600)} <a@${w.domain.name}>`], ['to', name], ['cc', [name]], ['replyTo', name]] as const) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { [field]: value }) });
    t.is(res.status, 400, `${field}: ${JSON.stringify(res.body).slice(0, 200)}`);
    t.regex(String(res.body.error?.message), new RegExp(`^${field}(\\[0\\])?: contains a word longer than`), field);
  }
});

test('a list page whose bodies are large is written item by item, the same JSON as a small page', async (t) => {
  const tag = `big-${Date.now()}`;
  const text = 'x'.repeat(3_000_000);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { text, html: `<p>${i}</p>`, tags: [tag], scheduledAt: 'in 2 days' }) });
    t.is(res.status, 200);
    ids.push(res.body.emailId);
  }
  const big = await w.t0.request('GET', `/v1/emails?tag=${tag}`);
  t.is(big.status, 200);
  t.regex(big.headers.get('content-type') ?? '', /application\/json/);
  t.is(big.headers.get('content-length'), null, 'streamed: no length known up front');
  t.is(big.body.count, 3);
  t.deepEqual(big.body.data.map((e: any) => e.id), [...ids].reverse());
  for (const e of big.body.data) t.is(e.text.length, 3_000_000);
  // Two of them fit in one string: the usual response, item for item the same.
  const small = await w.t0.request('GET', `/v1/emails?tag=${tag}&limit=2`);
  t.not(small.headers.get('content-length'), null);
  t.deepEqual(small.body.data, big.body.data.slice(0, 2));
  const empty = await w.t0.request('GET', `/v1/emails?tag=${tag}&page=9`);
  t.deepEqual(empty.body, { data: [], count: 3 });
  for (const id of ids) await w.t0.request('POST', `/v1/emails/${id}/cancel`);
});
