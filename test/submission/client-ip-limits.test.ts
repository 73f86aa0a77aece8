import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { rawSmtpSession as connect } from '../inbound/helpers/smtp-client.js';

// The per-client-address limits of the SMTP listeners, as clients on 127.0.0.1 and 127.0.0.2
// (loopback aliases, as source addresses) meet them: a cap on connections open at once, and on
// submission a lockout of an address after too many failed AUTHs, lifted when its window passes
// (the injected clock, moved by the test).

const CAP = 2;
const AUTH_LIMIT = 4;
const clock = new ManualClock();
let t0: TestApp;

test.before(async () => {
  t0 = await startTestApp({
    clock,
    overrides: {
      submission: { maxConnectionsPerIp: CAP, authFailureLimit: AUTH_LIMIT, authFailureWindow: '15m' },
      inbound: { maxConnectionsPerIp: CAP },
    },
  });
});
test.after.always(async () => {
  await t0?.close();
});

const plainAuth = (pass: string) => `AUTH PLAIN ${Buffer.from(`\0apikey\0${pass}`).toString('base64')}`;
const WRONG = 'ph_000000000000_notARealSecretAtAll0001';

/** Connects until the greeting is 220: the server releases a closed connection's slot just after the close. */
async function connectOnceFree(port: number, from?: string) {
  for (;;) {
    const c = await connect(port, from);
    if (c.greeting.startsWith('220')) return c;
    c.close();
  }
}

for (const listener of ['submission', 'inbound'] as const) {
  test.serial(`${listener}: the connection over the per-address cap is told 421 4.7.0 and closed; another address is not held back; a slot freed is taken again`, async (t) => {
    const port = t0.app.listeners[listener]!.port;
    const open = [await connect(port), await connect(port)];
    for (const c of open) t.regex(c.greeting, /^220 /);
    const over = await connect(port);
    t.regex(over.greeting, /^421 4\.7\.0 .*too many connections from your address \(at most 2 at once\)/);
    await over.closedByServer();
    // 127.0.0.2 is another client: its own count.
    const other = await connect(port, '127.0.0.2');
    t.regex(other.greeting, /^220 /);
    // One of the first two leaves: the address may connect again.
    await open[0]!.quit();
    const again = await connectOnceFree(port);
    t.regex(again.greeting, /^220 /);
    for (const c of [open[1]!, other, again]) c.close();
    const metrics = await (await fetch(`${t0.baseUrl}/metrics`)).text();
    t.regex(metrics, new RegExp(`posthorn_smtp_refused_total\\{listener="${listener}",reason="connections_per_ip"\\} [1-9]`));
  });
}

test.serial('submission: failed AUTHs from one address lock it out (421 4.7.0 at connect and at AUTH) until the window passes; another address is unaffected; a success does not clear the count', async (t) => {
  const port = t0.app.listeners.submission!.port;
  // An open connection from the address, authenticated, before the lockout.
  const before = await connectOnceFree(port);
  await before.starttls();
  t.regex(await before.command(plainAuth(t0.key)), /^235 /);
  // A success does not clear failures: 3 failures (the connection closes after its third) ...
  const first = await connectOnceFree(port);
  await first.starttls();
  t.regex(await first.command(plainAuth(WRONG)), /^535 5\.7\.8 /);
  t.regex(await first.command(plainAuth(WRONG)), /^535 5\.7\.8 /);
  t.regex(await first.command(plainAuth(WRONG)), /^421 4\.7\.0 too many failed authentication attempts \(3\)/);
  await first.closedByServer();
  before.close();
  // ... and a good AUTH between them and the next one.
  const second = await connectOnceFree(port);
  await second.starttls();
  const late = await connectOnceFree(port);
  await late.starttls();
  t.regex(await second.command(plainAuth(t0.key)), /^235 /);
  second.close();
  // The fourth failure within the window locks the address out.
  const third = await connectOnceFree(port, '127.0.0.1');
  await third.starttls();
  t.regex(await third.command(plainAuth(WRONG)), /^421 4\.7\.0 .*too many failed authentication attempts from your address, try again in 15 min/);
  await third.closedByServer();

  // A connection opened before is refused at its next AUTH, even with the right key.
  t.regex(await late.command(plainAuth(t0.key)), /^421 4\.7\.0 .*from your address/);
  await late.closedByServer();
  // New connections are refused at once, with the time left.
  clock.advance(5 * 60_000);
  const refused = await connect(port);
  t.regex(refused.greeting, /^421 4\.7\.0 .*too many failed authentication attempts from your address, try again in 10 min/);
  await refused.closedByServer();

  // Another address authenticates as ever.
  const other = await connect(port, '127.0.0.2');
  t.regex(other.greeting, /^220 /);
  await other.starttls();
  t.regex(await other.command(plainAuth(t0.key)), /^235 /);
  other.close();

  // The window passes: the address is let in again, its count started afresh.
  clock.advance(10 * 60_000);
  const after = await connectOnceFree(port);
  t.regex(after.greeting, /^220 /);
  await after.starttls();
  t.regex(await after.command(plainAuth(WRONG)), /^535 5\.7\.8 /);
  t.regex(await after.command(plainAuth(t0.key)), /^235 /);
  after.close();

  const metrics = await (await fetch(`${t0.baseUrl}/metrics`)).text();
  t.regex(metrics, /posthorn_smtp_refused_total\{listener="submission",reason="auth_lockout"\} [3-9]/);
});
