import test from 'ava';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SMTPServer } from 'smtp-server';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { testCert } from '../helpers/test-keys.js';
import { createDnsClient } from '../../src/lib/dns/dns-client.js';
import { toNodeStyleResolver } from '../../src/lib/dns/node-style-resolver.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { startTestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { tempDir } from '../helpers/temp-dir.js';

// The upstream relay (smarthost) option, end to end: the relay is named in the config and
// resolved through our resolver, reached with STARTTLS (certificate verified) and AUTH, and
// every message (whatever its recipients' domains) goes to it, still DKIM-signed by us.
test('with a relay configured, all mail goes through it, authenticated, over verified TLS, DKIM-signed', async (t) => {
  const zone = await startDnsZone();
  const { key, cert } = await testCert({ hostnames: ['relay.upstream.test'] });
  const received: { user: string | undefined; rcptTo: string[]; raw: Buffer; secure: boolean }[] = [];
  let resolveReceived: () => void;
  const gotOne = new Promise<void>((r) => (resolveReceived = r));
  const relay = new SMTPServer({
    key,
    cert,
    authMethods: ['PLAIN', 'LOGIN'],
    logger: false,
    onAuth(auth, _session, cb) {
      if (auth.username === 'posthorn' && auth.password === 's3cret') return cb(null, { user: 'posthorn' });
      cb(Object.assign(new Error('Invalid credentials'), { responseCode: 535 }));
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({ user: session.user as string | undefined, rcptTo: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks), secure: session.secure });
        cb();
        resolveReceived();
      });
    },
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  const port = (relay.server.address() as { port: number }).port;
  zone.set('relay.upstream.test', 'A', ['127.0.0.1']);
  const caFile = join(tempDir(t, 'posthorn-relay-'), 'ca.pem');
  writeFileSync(caFile, cert);
  const t0 = await startTestApp({
    zone,
    overrides: { outbound: { caFile, relay: { host: 'relay.upstream.test', port, secure: 'starttls', user: 'posthorn', password: 's3cret' } } },
  });
  t.teardown(async () => {
    await t0.close();
    await new Promise<void>((r) => relay.close(() => r()));
    await zone.close();
  });
  const domain = await addVerifiedDomain(t0, 'relayed-sender.dev');
  // The recipient domain has no MX at all: with a relay, no MX lookup happens.
  const res = await t0.request('POST', '/v1/emails', { body: { from: `hi@${domain.name}`, to: 'someone@no-mx-here.example', subject: 'Via relay', text: 'Hello' } });
  t.is(res.status, 200);
  await gotOne;
  t.is(received.length, 1);
  t.is(received[0]!.user, 'posthorn');
  t.true(received[0]!.secure);
  t.deepEqual(received[0]!.rcptTo, ['someone@no-mx-here.example']);
  const verified = await dkimVerify(received[0]!.raw, { resolver: toNodeStyleResolver(createDnsClient({ servers: [zone.server], timeoutMs: 500, tries: 1 })) as never });
  t.is((verified as { results: { status: { result: string } }[] }).results[0]?.status.result, 'pass');
  // the relay's 250 is in; its result is recorded once the engine has nothing left in flight
  await t0.app.engine.whenIdle();
  t.regex(String((await t0.app.services.emails.get({ teamId: t0.teamId, domainId: null, apiKeyId: null }, res.body.emailId)).latestStatus), /SENT|DELIVERED/);
});

// A relay that wants AUTH when none is configured answers MAIL FROM with 530: that is the
// operator's setting, the same for every message, so the mail waits (DELIVERY_DELAYED) instead
// of every recipient being BOUNCED.
test('a relay refusing us for its own reasons (530 authentication required) defers the mail; nothing is bounced or suppressed', async (t) => {
  const zone = await startDnsZone();
  const relay = new SMTPServer({ logger: false, disabledCommands: ['STARTTLS'], authMethods: ['PLAIN'] });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  const port = (relay.server.address() as { port: number }).port;
  const t0 = await startTestApp({ zone, overrides: { outbound: { relay: { host: '127.0.0.1', port, secure: 'none' } } } });
  t.teardown(async () => {
    await t0.close();
    await new Promise<void>((r) => relay.close(() => r()));
    await zone.close();
  });
  const domain = await addVerifiedDomain(t0, 'relay-misconfigured.dev');
  const res = await t0.request('POST', '/v1/emails', { body: { from: `hi@${domain.name}`, to: 'someone@example.net', subject: 'Via relay', text: 'Hello' } });
  t.is(res.status, 200);
  await t0.app.engine.whenIdle();
  const email = await t0.app.services.emails.get({ teamId: t0.teamId, domainId: null, apiKeyId: null }, res.body.emailId);
  t.is(email.latestStatus, 'DELIVERY_DELAYED');
  const delayed = email.emailEvents.find((e) => e.status === 'DELIVERY_DELAYED')!;
  t.regex(String(delayed.data?.response), /530/);
  t.is((await t0.request('GET', '/v1/suppressions/someone@example.net')).status, 404);
});
