import test from 'ava';
import { startDnsZone } from '../helpers/dns-zone.js';
import { startSmtpSink } from '../helpers/smtp-sink.js';
import { apiClient, loopbackEnv, startPosthorn } from '../proof/helpers/posthorn-process.js';
import { tempDir } from '../helpers/temp-dir.js';

const MESSAGES = 150;

test('kill -9 while messages are in flight: after a restart every accepted message is delivered (at least once)', async (t) => {
  const zone = await startDnsZone();
  const sink = await startSmtpSink({ hostname: 'mx.crash.test' });
  zone.set('mx.crash.test', 'A', ['127.0.0.1']);
  zone.set('crash-rcpt.example', 'MX', [{ exchange: 'mx.crash.test', priority: 10 }]);
  const env = loopbackEnv(
    { dataDir: tempDir(t, 'posthorn-crash-'), dnsServer: zone.server, sinkPort: sink.port, hostname: 'mx.posthorn-crash.test' },
    { POSTHORN_RATE_LIMIT: '100000' },
  );
  let server = await startPosthorn({ env, expectKey: true });
  t.teardown(async () => {
    await server.kill();
    await sink.close();
    await zone.close();
  });
  const key = server.key!;
  t.truthy(key, 'the first start printed a key');
  const api = apiClient(() => server, key);
  const domain = (await api('POST', '/v1/domains', { name: 'crash-sender.dev', region: 'r' })).body;
  for (const r of domain.dnsRecords) zone.set(r.name, r.type, [r.type === 'MX' ? { exchange: r.value, priority: 10 } : r.value]);
  await api('PUT', `/v1/domains/${domain.id}/verify`);

  const ids: string[] = [];
  const batches = [];
  for (let i = 0; i < MESSAGES; i += 50) {
    batches.push(Array.from({ length: 50 }, (_, j) => ({ from: 'hi@crash-sender.dev', to: `r${i + j}@crash-rcpt.example`, subject: `m${i + j}`, text: 'x' })));
  }
  for (const b of batches) {
    const res = await api('POST', '/v1/emails/batch', b);
    t.is(res.status, 200);
    ids.push(...res.body.data.map((d: { emailId: string }) => d.emailId));
  }
  // Kill the process mid-delivery: some messages are out, others leased or still queued.
  await sink.waitForMessages(10);
  await server.kill();
  const deliveredBeforeKill = new Set(sink.messages.flatMap((m) => m.rcptTo)).size;
  t.log(`${deliveredBeforeKill} of ${MESSAGES} recipients had their message before the kill`);

  server = await startPosthorn({ env });
  const expected = new Set(Array.from({ length: MESSAGES }, (_, i) => `r${i}@crash-rcpt.example`));
  for (;;) {
    const got = new Set(sink.messages.flatMap((m) => m.rcptTo));
    if ([...expected].every((r) => got.has(r))) break;
    await sink.waitForMessages(sink.messages.length + 1, 20_000);
  }
  // Every accepted email reaches DELIVERED once the restarted engine has recorded the sink's
  // 250 (a moment after the sink saw the message): poll the API, a bounded number of times.
  for (const id of ids) {
    let status = '';
    for (let i = 0; i < 200 && status !== 'DELIVERED'; i++) status = (await api('GET', `/v1/emails/${id}`)).body.latestStatus;
    t.is(status, 'DELIVERED', id);
  }
});
