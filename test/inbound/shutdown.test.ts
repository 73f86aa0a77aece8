import test from 'ava';
import { SMTPServer } from 'smtp-server';
import { rmSync } from 'node:fs';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { untilRefused } from '../helpers/port-probe.js';
import { rawSession, smtpSend } from './helpers/smtp-client.js';

// A graceful stop while a message is being stored: the sender still gets its 250, the
// message is in the store after a restart, and idle sessions are told 421.

/** Holds the app's inbound store step: `storing` resolves when a message reaches it, `release` lets it go on. */
function holdStoring(app: TestApp): { storing: Promise<void>; release: () => void } {
  const received = app.app.inbound.received;
  const original = received.store.bind(received);
  let entered!: () => void;
  const storing = new Promise<void>((resolve) => (entered = resolve));
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  received.store = async (...args) => {
    entered();
    await gate;
    return original(...args);
  };
  return { storing, release };
}

test('stopping during DATA finishes storing, answers 250, and the message survives a restart', async (t) => {
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  const first = await startTestApp({ zone });
  const inbox = await addVerifiedDomain(first, 'inbox.dev');
  await first.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } });
  const port = first.app.listeners.inbound!.port;

  // Hold the store step until the stop has begun.
  const { storing, release } = holdStoring(first);

  const idle = await rawSession(port);
  await idle.reply();
  await idle.command('EHLO idle.test');

  const sending = smtpSend({ port, from: 'a@remote.example', to: ['b@inbox.dev'], raw: 'From: a@remote.example\r\nSubject: in flight\r\n\r\nbody\r\n' });
  await storing;
  const stopping = first.stop();
  await untilRefused(port); // the stop has begun: the listener takes no new connection
  release();
  const res = await sending;
  t.true(res.ok, res.response);
  t.regex(res.response, /^250 2\.0\.0 Ok: queued as re_/);
  await stopping;
  t.regex(await idle.reply(), /^421 /, 'idle sessions are told the server is going away');
  idle.close();

  const second = await startTestApp({ zone, dataDir: first.dataDir });
  t.teardown(async () => {
    await second.close();
    rmSync(first.dataDir, { recursive: true, force: true });
  });
  const teamKey = second.key; // a new key of the same (first) team
  const list = await second.request('GET', '/v1/receivedEmails', { key: teamKey });
  t.is(list.body.total, 1);
  t.is(list.body.receivedEmails[0].subject, 'in flight');
});

test.serial('a message still being stored when the close grace runs out is not cut off with 421 (it would be sent again)', async (t) => {
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  // The grace smtp-server gives open connections after close() (closeTimeout, 30 s by
  // default), made short for this app's listeners. Serial: no other app starts meanwhile.
  const listen = SMTPServer.prototype.listen;
  SMTPServer.prototype.listen = function (this: SMTPServer, ...args: unknown[]) {
    (this.options as { closeTimeout?: number }).closeTimeout = 100;
    return (listen as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof listen;
  let app: Awaited<ReturnType<typeof startTestApp>>;
  try {
    app = await startTestApp({ zone });
  } finally {
    SMTPServer.prototype.listen = listen;
  }
  t.teardown(() => app.close());
  const inbox = await addVerifiedDomain(app, 'inbox.dev');
  await app.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } });
  const port = app.app.listeners.inbound!.port;

  const { storing, release } = holdStoring(app);

  const idle = await rawSession(port);
  await idle.reply();
  await idle.command('EHLO idle.test');
  const sending = smtpSend({ port, from: 'a@remote.example', to: ['b@inbox.dev'], raw: 'From: a@remote.example\r\nSubject: slow store\r\n\r\nbody\r\n' });
  await storing;
  const stopping = app.stop();
  try {
    // The grace is over once the idle session is told 421; the message is still being stored.
    t.regex(await idle.reply(10_000), /^421 /);
  } finally {
    idle.close();
    release();
  }
  const res = await sending;
  t.true(res.ok, res.response);
  t.regex(res.response, /^250 2\.0\.0 Ok: queued as re_/);
  await stopping;
});
