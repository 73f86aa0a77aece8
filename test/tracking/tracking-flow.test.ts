import { request as httpRequest } from 'node:http';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startWebhookReceiver, verifySignature, type WebhookReceiver } from '../webhooks/webhook-receiver.js';
import { ManualClock } from '../../src/lib/clock.js';

// Opens and clicks end to end: the message as the recipient's MX received it, its pixel and
// links fetched over HTTP, the email's events and the webhook events that follow. The reader
// opens a minute after delivery (the clock is moved), as a person would: a hit within
// tracking.machineWindowSeconds is a machine's (tracking-machine.test.ts).

let w: MailWorld;
let receiver: WebhookReceiver;
let hook: { id: string; secret: string };
const clock = new ManualClock(Date.UTC(2026, 10, 23, 9, 0, 0));

test.before(async () => {
  w = await startMailWorld({ clock, overrides: { webhooks: { allowPrivate: true } } });
  receiver = await startWebhookReceiver();
  hook = (await w.t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['email.opened', 'email.clicked'] } })).body;
});
test.after.always(async () => {
  await w?.close();
  await receiver?.close();
});

/** Sends and returns the HTML and text as delivered to the sink. */
async function deliver(body: Record<string, unknown>): Promise<{ id: string; html: string; text: string }> {
  const before = w.sink.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, body) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  const [msg] = (await w.sink.waitForMessages(before + 1)).slice(before);
  const parsed = await simpleParser(msg!.raw);
  // The DELIVERED event follows the sink's reply; the reader comes a minute later.
  for (;;) {
    const email = (await w.t0.request('GET', `/v1/emails/${res.body.emailId}`)).body;
    if (email.emailEvents.some((e: any) => e.status === 'DELIVERED')) break;
    await new Promise((r) => setImmediate(r));
  }
  clock.advance(60_000);
  return { id: res.body.emailId, html: String(parsed.html || ''), text: parsed.text ?? '' };
}

const hrefs = (html: string) => [...html.matchAll(/<a\b[^>]*\shref=(?:"([^"]*)"|'([^']*)')/g)].map((m) => (m[1] ?? m[2]!).replace(/&amp;/g, '&'));
const pixel = (html: string) => /<img src="([^"]*\/t\/o\/[^"]*)"/.exec(html)?.[1];

/** GET/HEAD against the app with any Host header (fetch cannot set Host). */
function get(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; headers: Record<string, any>; body: Buffer }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port: w.t0.app.listeners.http!.port, path: u.pathname + u.search, method, headers: { host: u.host, ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function events(id: string, status: string) {
  const email = (await w.t0.request('GET', `/v1/emails/${id}`)).body;
  return { latest: email.latestStatus as string, list: email.emailEvents.filter((e: any) => e.status === status) as any[] };
}

const HTML = [
  '<html><body><p>Hello</p>',
  '<a href="https://example.com/a?x=1&amp;y=2">Read</a>',
  "<a href='https://example.com/b'>More</a>",
  '<a href="mailto:help@sender.dev">Mail us</a>',
  '<a href="https://sender.dev/unsubscribe?c=42">Unsubscribe</a>',
  '<a href="#top">Top</a>',
  '</body></html>',
].join('\n');

test.serial('without tracking on the domain the HTML is sent as written', async (t) => {
  const { html } = await deliver({ html: HTML, subject: 'plain' });
  t.deepEqual(hrefs(html), ['https://example.com/a?x=1&y=2', 'https://example.com/b', 'mailto:help@sender.dev', 'https://sender.dev/unsubscribe?c=42', '#top']);
  t.is(pixel(html), undefined);
});

test.serial('open pixel and click links: rewritten on the shared host, recorded as events and sent to webhooks', async (t) => {
  const patch = await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { openTracking: true, clickTracking: true } });
  t.is(patch.status, 200);
  const { id, html, text } = await deliver({ html: HTML, subject: 'tracked' });
  const links = hrefs(html);
  t.regex(links[0]!, /^http:\/\/posthorn\.test\/t\/c\/em_[A-Za-z0-9]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
  t.regex(links[1]!, /^http:\/\/posthorn\.test\/t\/c\//);
  t.deepEqual(links.slice(2), ['mailto:help@sender.dev', 'https://sender.dev/unsubscribe?c=42', '#top'], 'mailto, unsubscribe and anchors untouched');
  const px = pixel(html)!;
  t.regex(px, /^http:\/\/posthorn\.test\/t\/o\/em_[A-Za-z0-9]+\.[A-Za-z0-9_-]{22}\.gif$/);
  t.regex(html, /<img src="[^"]+" width="1" height="1" alt=""[^>]*\/>\s*<\/body>/);
  t.false(text.includes('/t/c/'), 'the plain-text part keeps the original links');

  // Open: always a GIF; recorded with time, user agent and client IP (the connection's: a
  // forged X-Forwarded-For is ignored unless http.trustProxy is on, see test/api/trust-proxy.test.ts).
  const opened = await get(px, { 'user-agent': 'TestMail/1.0', 'x-forwarded-for': '203.0.113.9' });
  t.is(opened.status, 200);
  t.is(opened.headers['content-type'], 'image/gif');
  t.regex(String(opened.headers['cache-control']), /no-store/);
  t.is(opened.body.subarray(0, 6).toString(), 'GIF89a');
  let ev = await events(id, 'OPENED');
  t.is(ev.latest, 'OPENED');
  t.is(ev.list.length, 1);
  t.like(ev.list[0].data, { userAgent: 'TestMail/1.0', ip: '127.0.0.1', machine: false, machineReason: null });
  t.truthy(Date.parse(ev.list[0].data.timestamp));

  // Click: a 302 to exactly the original URL, recorded with the URL.
  const clicked = await get(links[0]!, { 'user-agent': 'TestMail/1.0', 'x-forwarded-for': '203.0.113.9' });
  t.is(clicked.status, 302);
  t.is(clicked.headers.location, 'https://example.com/a?x=1&y=2');
  ev = await events(id, 'CLICKED');
  t.is(ev.latest, 'CLICKED');
  t.like(ev.list[0].data, { url: 'https://example.com/a?x=1&y=2', userAgent: 'TestMail/1.0', ip: '127.0.0.1' });

  // Webhooks: email.opened then email.clicked, signed, with open/click details.
  const [openCall, clickCall] = await receiver.waitFor(2);
  t.true(verifySignature(hook.secret, openCall!) && verifySignature(hook.secret, clickCall!));
  t.is(openCall!.json.type, 'email.opened');
  t.like(openCall!.json.data, { id, status: 'OPENED', subject: 'tracked', domainId: w.domain.id, open: { userAgent: 'TestMail/1.0', ip: '127.0.0.1' } });
  t.truthy(openCall!.json.data.open.timestamp);
  t.is(clickCall!.json.type, 'email.clicked');
  t.like(clickCall!.json.data, { id, status: 'CLICKED', click: { url: 'https://example.com/a?x=1&y=2', userAgent: 'TestMail/1.0', ip: '127.0.0.1' } });

  // A second open is recorded too (with no user agent: flagged as a machine's); latestStatus never goes back.
  await get(px);
  ev = await events(id, 'OPENED');
  t.is(ev.list.length, 2);
  t.is(ev.latest, 'CLICKED');

  // A HEAD only probes: redirected, not recorded.
  const head = await get(links[1]!, {}, 'HEAD');
  t.is(head.status, 302);
  t.is(head.headers.location, 'https://example.com/b');
  t.is((await events(id, 'CLICKED')).list.length, 1);
});

test.serial('a tampered link is a 404, never a redirect; a tampered pixel records nothing', async (t) => {
  const { id, html } = await deliver({ html: HTML, subject: 'tamper' });
  const link = hrefs(html)[0]!;
  const [prefix, token] = link.split('/t/c/');
  const [emailId, , sig] = token!.split('.');
  const swapped = `${prefix}/t/c/${emailId}.${Buffer.from('https://evil.example/').toString('base64url')}.${sig}`;
  const flipped = link.slice(0, -1) + (link.endsWith('A') ? 'B' : 'A');
  for (const bad of [swapped, flipped, `${prefix}/t/c/nonsense`, `${prefix}/t/c/${'x'.repeat(9000)}`]) {
    const res = await get(bad);
    t.is(res.status, 404, bad.slice(0, 80));
    t.is(res.headers.location, undefined);
    t.is(JSON.parse(res.body.toString()).error.code, 'NOT_FOUND');
  }
  const px = pixel(html)!;
  const forged = await get(px.replace(/\.([A-Za-z0-9_-]{22})\.gif$/, '.AAAAAAAAAAAAAAAAAAAAAA.gif'));
  t.is(forged.status, 200);
  t.is(forged.headers['content-type'], 'image/gif');
  const junk = await get(`${prefix}/t/o/whatever`);
  t.is(junk.status, 200);
  t.is((await events(id, 'OPENED')).list.length, 0);
  t.is((await events(id, 'CLICKED')).list.length, 0);
});

test.serial('the List-Unsubscribe link is never rewritten even without "unsubscribe" in it', async (t) => {
  const before = w.sink.messages.length;
  const { emailId } = await w.t0.app.services.emails.submit(
    { teamId: w.t0.teamId, domainId: null, apiKeyId: null },
    { from: `hello@${w.domain.name}`, to: 'alice@example.net', subject: 'list', html: '<p><a href="https://sender.dev/u/tok123">Leave this list</a> <a href="https://example.com/news">News</a></p>' },
    { systemHeaders: { 'List-Unsubscribe': '<https://sender.dev/u/tok123>, <mailto:u@sender.dev>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' } },
  );
  w.t0.app.engine.wake();
  const [msg] = (await w.sink.waitForMessages(before + 1)).slice(before);
  const parsed = await simpleParser(msg!.raw);
  const links = hrefs(String(parsed.html));
  t.is(links[0], 'https://sender.dev/u/tok123');
  t.regex(links[1]!, /\/t\/c\//);
  t.truthy(emailId);
});

test.serial('every link in a tracked message leads where it was written: long URLs, entities and non-ASCII', async (t) => {
  const long = `https://example.com/long?state=${'a'.repeat(6500)}`;
  const odd = 'https://bücher.example/straße?q=a b&c=ü#teil';
  const { html } = await deliver({
    subject: 'odd links',
    html: `<html><body><a href="${long}">Long</a> <a href="${odd.replace('&', '&amp;')}">Odd</a> <a href="https://example.com/?a=1&#38;b=&#x32;">Entities</a></body></html>`,
  });
  const links = hrefs(html);
  t.is(links.length, 3);
  const expected = [long, new URL(odd).href, 'https://example.com/?a=1&b=2'];
  for (const [i, link] of links.entries()) {
    if (link === expected[i]) continue; // left as written: fine, it works as it is
    const res = await get(link);
    t.is(res.status, 302, `link ${i}: ${link.slice(0, 80)}`);
    t.is(res.headers.location, expected[i], `link ${i}`);
  }
  t.is(links[0], long, 'a link too long to carry in a tracked link stays as written');
  t.true(links.slice(1).every((l) => l.includes('/t/c/')), 'the others are tracked');
});

test.serial('a link written with an entity the tracker cannot read leads where a browser reads it, or stays as written', async (t) => {
  // "caf&eacute;" is "café" to every mail client; the tracked link redirected to ".../caf&eacute;", a page that does not exist.
  const written = ['https://example.com/caf&eacute;', 'https://example.com/?r=&euro;5&amp;s=1', 'https://example.com/&#x80;'];
  const readByBrowser = ['https://example.com/caf%C3%A9', 'https://example.com/?r=%E2%82%AC5&s=1', 'https://example.com/%E2%82%AC'];
  t.is((await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { clickTracking: true } })).status, 200);
  const { html } = await deliver({ subject: 'entities', html: `<html><body>${written.map((u, i) => `<a href="${u}">L${i}</a>`).join(' ')}</body></html>` });
  const links = [...html.matchAll(/<a\b[^>]*\shref="([^"]*)"/g)].map((m) => m[1]!);
  t.is(links.length, written.length);
  for (const [i, link] of links.entries()) {
    if (link === written[i]) continue; // left as written: the client reads it as it always did
    const res = await get(link.replace(/&amp;/g, '&'));
    t.is(res.status, 302, `link ${i}`);
    t.is(res.headers.location, readByBrowser[i], `link ${i}`);
  }
});

test.serial('links move to the tracking domain once its CNAME resolves; another domain’s tracking host cannot serve them', async (t) => {
  const setTracking = await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { trackingDomain: 'track' } });
  t.is(setTracking.body.trackingDomain, 'track.sender.dev');
  t.is(setTracking.body.trackingDomainStatus, 'PENDING');
  // Not published yet: still the shared host.
  await w.t0.request('PUT', `/v1/domains/${w.domain.id}/verify`);
  let sent = await deliver({ html: HTML, subject: 'cname pending' });
  t.regex(hrefs(sent.html)[0]!, /^http:\/\/posthorn\.test\/t\/c\//);

  w.zone.set('track.sender.dev', 'CNAME', ['mx.posthorn.test']);
  const verified = await w.t0.request('PUT', `/v1/domains/${w.domain.id}/verify`);
  t.is(verified.status, 200);
  t.is((await w.t0.request('GET', `/v1/domains/${w.domain.id}`)).body.trackingDomainStatus, 'SUCCESS');
  sent = await deliver({ html: HTML, subject: 'cname live' });
  const link = hrefs(sent.html)[0]!;
  const px = pixel(sent.html)!;
  t.regex(link, /^http:\/\/track\.sender\.dev\/t\/c\//);
  t.regex(px, /^http:\/\/track\.sender\.dev\/t\/o\//);

  // Served on the tracking host (routed by Host).
  t.is((await get(px)).status, 200);
  t.is((await events(sent.id, 'OPENED')).list.length, 1);
  const ok = await get(link);
  t.is(ok.status, 302);

  // Another team's (or domain's) tracking host must not redirect for this domain's links.
  const other = await addVerifiedDomain(w.t0, 'other.dev');
  await w.t0.request('PATCH', `/v1/domains/${other.id}`, { body: { trackingDomain: 'track.other.dev', clickTracking: true } });
  w.zone.set('track.other.dev', 'CNAME', ['mx.posthorn.test']);
  await w.t0.request('PUT', `/v1/domains/${other.id}/verify`);
  const foreignLink = link.replace('track.sender.dev', 'track.other.dev');
  const foreign = await get(foreignLink);
  t.is(foreign.status, 404);
  t.is(foreign.headers.location, undefined);
  // The same foreign host however the request spells it: DNS resolves a trailing dot (a fully
  // qualified name) and any case to that very host, so they must not open its wall.
  for (const spelling of ['track.other.dev.', 'TRACK.Other.DEV.', 'track.other.dev.:80']) {
    const res = await get(link.replace('track.sender.dev', spelling));
    t.is(res.status, 404, spelling);
    t.is(res.headers.location, undefined, spelling);
  }
  const foreignPixel = await get(px.replace('track.sender.dev', 'track.other.dev'));
  t.is(foreignPixel.status, 200);
  t.is((await events(sent.id, 'OPENED')).list.length, 1, 'not recorded through a foreign host');
  t.is((await events(sent.id, 'CLICKED')).list.length, 1);
});

test.serial('open tracking alone adds the pixel and leaves links alone', async (t) => {
  await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { clickTracking: false, trackingDomain: null } });
  const { html } = await deliver({ html: HTML, subject: 'opens only' });
  t.deepEqual(hrefs(html).slice(0, 2), ['https://example.com/a?x=1&y=2', 'https://example.com/b']);
  t.regex(pixel(html)!, /^http:\/\/posthorn\.test\/t\/o\//);
});
