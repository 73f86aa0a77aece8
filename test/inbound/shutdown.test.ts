import test from 'ava';
import { rmSync } from 'node:fs';
import { startTestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { rawSession, smtpSend } from './helpers/smtp-client.js';

// A graceful stop while a message is being stored: the sender still gets its 250, the
// message is in the store after a restart, and idle sessions are told 421.

test('stopping during DATA finishes storing, answers 250, and the message survives a restart', async (t) => {
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  const first = await startTestApp({ zone });
  const inbox = await addVerifiedDomain(first, 'inbox.dev');
  await first.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } });
  const port = first.app.listeners.inbound!.port;

  // Hold the store step until the stop has begun.
  const received = first.app.inbound.received;
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

  const idle = await rawSession(port);
  await idle.reply();
  await idle.command('EHLO idle.test');

  const sending = smtpSend({ port, from: 'a@remote.example', to: ['b@inbox.dev'], raw: 'From: a@remote.example\r\nSubject: in flight\r\n\r\nbody\r\n' });
  await storing;
  const stopping = first.stop();
  await new Promise((r) => setTimeout(r, 50));
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
