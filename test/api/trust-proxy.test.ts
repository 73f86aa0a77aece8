import { request as httpRequest } from 'node:http';
import test from 'ava';
import { simpleParser } from 'mailparser';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';
import { ConsoleClient, consoleUser } from '../console/helpers/console-client.js';

// http.trustProxy: X-Forwarded-For is the client's own writing unless a proxy we trust put it
// there. By default it is ignored: a forged header neither gets around the console's sign-in
// limit per address nor changes the address tracking records. With trustProxy on (behind
// nginx or Caddy), the client address is the last entry, the one the proxy added.

let w: MailWorld;
let pixel: string;
let emailId: string;

test.before(async () => {
  w = await startMailWorld();
  await consoleUser(w.t0.app, 'real@sender.dev', w.t0.teamId);
  await w.t0.request('PATCH', `/v1/domains/${w.domain.id}`, { body: { openTracking: true } });
  const sent = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { html: '<p>Hi</p>', subject: 'tracked' }) });
  emailId = sent.body.emailId;
  const [msg] = await w.sink.waitForMessages(1);
  pixel = /<img src="http:\/\/posthorn\.test(\/t\/o\/[^"]+)"/.exec(String((await simpleParser(msg!.raw)).html))![1]!;
});
test.after.always(async () => {
  await w?.close();
});

/** A failed sign-in (a new address each time, so only the per-address limit can bite) with this X-Forwarded-For. */
async function failSignIn(n: number, forwardedFor: string): Promise<number> {
  const c = new ConsoleClient(w.t0.baseUrl);
  const page = await c.get('/console/login');
  const token = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
  const res = await c.request('POST', '/console/login', {
    form: { _csrf: token, email: `guess${n}@sender.dev`, password: 'not the password', next: '' },
    headers: { origin: w.t0.baseUrl, 'x-forwarded-for': forwardedFor },
  });
  return res.status;
}

/** Opens the tracking pixel with this X-Forwarded-For; returns the IP the OPENED event recorded. */
async function openWith(forwardedFor: string): Promise<string> {
  const before = (await w.t0.request('GET', `/v1/emails/${emailId}`)).body.emailEvents.filter((e: any) => e.status === 'OPENED').length;
  await new Promise<void>((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: w.t0.app.listeners.http!.port, path: pixel, headers: { host: 'posthorn.test', 'x-forwarded-for': forwardedFor } }, (res) => {
      res.resume();
      res.on('end', () => resolve());
    });
    req.on('error', reject);
    req.end();
  });
  const opened = (await w.t0.request('GET', `/v1/emails/${emailId}`)).body.emailEvents.filter((e: any) => e.status === 'OPENED');
  if (opened.length !== before + 1) throw new Error('the open was not recorded');
  return opened[opened.length - 1].data.ip;
}

test.serial('by default a forged X-Forwarded-For is ignored: the sign-in limit per address holds, tracking records the connection', async (t) => {
  t.false(w.t0.config.http.trustProxy);
  // 20 failures, each claiming another client address: all from this one connection's address.
  for (let i = 0; i < 20; i++) t.is(await failSignIn(i, `198.51.100.${i + 1}`), 401, `try ${i + 1}`);
  t.is(await failSignIn(20, '198.51.100.99'), 429);
  t.is(await openWith('203.0.113.9'), '127.0.0.1');
  // The real user, from the same address, waits too; the account limit is untouched.
  const c = new ConsoleClient(w.t0.baseUrl);
  t.is((await c.signIn('real@sender.dev')).status, 429);
});

test.serial("with http.trustProxy the client is X-Forwarded-For's last entry (the proxy's), not what the client wrote before it", async (t) => {
  await w.restart({ http: { trustProxy: true } });
  t.true(w.t0.config.http.trustProxy);
  // 25 failures from 25 clients behind the proxy: none is refused for its address.
  for (let i = 0; i < 25; i++) t.is(await failSignIn(i, `198.51.100.${i + 1}`), 401, `client ${i + 1}`);
  // One client forging a new first entry each time is still the one client the proxy saw.
  for (let i = 0; i < 20; i++) t.is(await failSignIn(100 + i, `10.0.0.${i + 1}, 192.0.2.7`), 401);
  t.is(await failSignIn(200, '10.0.0.250, 192.0.2.7'), 429);
  t.is(await failSignIn(201, '192.0.2.8'), 401, 'another client is not held back');
  t.is(await openWith('10.0.0.1, 203.0.113.9'), '203.0.113.9');
  t.is(await openWith('203.0.113.10'), '203.0.113.10');
});
