import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { rawSmtpSession as connect } from '../inbound/helpers/smtp-client.js';

// inbound.exemptNetworks and submission.exemptNetworks (docs/operations.md, SMTP client limits):
// clients in them pass the per-address connection cap and the AUTH lockout, as a local app or
// a relay of one's own needs; everyone else still meets both. Loopback aliases stand for the
// clients: 127.0.1.0/24 is a listed network, 127.0.0.3 is listed in its IPv4-mapped form, and
// 127.0.0.1 is not listed.

const CAP = 1;
const AUTH_LIMIT = 2;
const EXEMPT_NET = '127.0.1.7';
const EXEMPT_MAPPED = '127.0.0.3';
const clock = new ManualClock();
let t0: TestApp;

test.before(async () => {
  t0 = await startTestApp({
    clock,
    overrides: {
      submission: { maxConnectionsPerIp: CAP, authFailureLimit: AUTH_LIMIT, authFailureWindow: '15m', exemptNetworks: ['127.0.1.0/24', `::ffff:${EXEMPT_MAPPED}`] },
      inbound: { maxConnectionsPerIp: CAP, exemptNetworks: ['127.0.1.0/24'] },
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
  test.serial(`${listener}: a client in exemptNetworks holds more connections than the per-address cap; one outside is still refused over it`, async (t) => {
    const port = t0.app.listeners[listener]!.port;
    const exempt = [await connect(port, EXEMPT_NET), await connect(port, EXEMPT_NET), await connect(port, EXEMPT_NET)];
    for (const c of exempt) t.regex(c.greeting, /^220 /, 'the cap is 1; an exempt client is not counted');
    const held = await connectOnceFree(port, '127.0.0.1');
    const over = await connect(port, '127.0.0.1');
    t.regex(over.greeting, /^421 4\.7\.0 .*too many connections from your address \(at most 1 at once\)/);
    await over.closedByServer();
    for (const c of [...exempt, held]) c.close();
  });
}

test.serial('submission: a client in exemptNetworks is never locked out after failed AUTHs (each connection still closes after its third), and still needs a valid key; one outside is locked out', async (t) => {
  const port = t0.app.listeners.submission!.port;
  // Six failures from the exempt address (the lockout takes 2), three per connection.
  for (let i = 0; i < 2; i++) {
    const c = await connect(port, EXEMPT_MAPPED);
    t.regex(c.greeting, /^220 /);
    await c.starttls();
    t.regex(await c.command(plainAuth(WRONG)), /^535 5\.7\.8 /, 'a wrong key is refused as ever');
    t.regex(await c.command(plainAuth(WRONG)), /^535 5\.7\.8 /);
    t.regex(await c.command(plainAuth(WRONG)), /^421 4\.7\.0 too many failed authentication attempts \(3\)/, 'the per-connection limit stays');
    await c.closedByServer();
  }
  const after = await connect(port, EXEMPT_MAPPED);
  t.regex(after.greeting, /^220 /, 'not refused at connect');
  await after.starttls();
  t.regex(await after.command(plainAuth(WRONG)), /^535 5\.7\.8 /, 'not refused at AUTH');
  t.regex(await after.command(plainAuth(t0.key)), /^235 /);
  after.close();

  // 127.0.0.1 is not exempt: its second failure locks it out.
  const outside = await connectOnceFree(port, '127.0.0.1');
  await outside.starttls();
  t.regex(await outside.command(plainAuth(WRONG)), /^535 5\.7\.8 /);
  t.regex(await outside.command(plainAuth(WRONG)), /^421 4\.7\.0 .*too many failed authentication attempts from your address, try again in 15 min/);
  await outside.closedByServer();
  const refused = await connect(port, '127.0.0.1');
  t.regex(refused.greeting, /^421 4\.7\.0 .*too many failed authentication attempts from your address/);
  await refused.closedByServer();

  // The exempt clients are let in all along (the network as much as the mapped entry).
  for (const from of [EXEMPT_MAPPED, EXEMPT_NET]) {
    const c = await connect(port, from);
    t.regex(c.greeting, /^220 /, from);
    c.close();
  }
  clock.advance(15 * 60_000);
});
