import test from 'ava';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { startDnsZone } from '../helpers/dns-zone.js';
import { tempDir } from '../helpers/temp-dir.js';
import { storeEnvOf } from '../helpers/test-app.js';
import { apiClient, loopbackEnv, startPosthorn } from '../proof/helpers/posthorn-process.js';
import { publishDomainRecords } from '../proof/helpers/crash-observer.js';

// Ctrl-C while an SMTP transaction is on the wire: the graceful stop lets it finish, which with
// an MX that never answers (port 25 filtered on the way, a tarpit) lasts up to the outbound
// timeouts. The terminal must not look hung: the server says what it waits for, and a second
// Ctrl-C stops it at once.

test('a stop held up by an SMTP transaction says so, and a second signal stops at once', async (t) => {
  t.timeout(60_000); // a bound on the hang this test exists for
  const held: Socket[] = [];
  const silent = createServer((socket) => {
    held.push(socket); // accepted, never greeted
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of held) s.destroy();
    silent.close();
  });
  const connected = new Promise<void>((resolve) => silent.once('connection', () => resolve()));
  const zone = await startDnsZone();
  t.teardown(() => zone.close());
  zone.set('mx.silent.test', 'A', ['127.0.0.1']);
  zone.set('example.net', 'MX', [{ exchange: 'mx.silent.test', priority: 10 }]);
  const dataDir = tempDir(t, 'posthorn-stopping-');
  const env = {
    ...loopbackEnv({ dataDir, dnsServer: zone.server, sinkPort: (silent.address() as AddressInfo).port }),
    POSTHORN_OUTBOUND_GREETING_TIMEOUT_MS: '600000',
    ...(await storeEnvOf(dataDir)),
  };
  const server = await startPosthorn({ env, expectKey: true });
  t.teardown(() => server.kill());
  const api = apiClient(() => server, server.key!);
  const domain = await api('POST', '/v1/domains', { name: 'example.com', region: 'default' });
  t.is(domain.status, 200, JSON.stringify(domain.body));
  publishDomainRecords(zone, domain.body);
  t.is((await api('PUT', `/v1/domains/${domain.body.id}/verify`)).status, 200);
  t.is((await api('POST', '/v1/emails', { from: 'a@example.com', to: 'x@example.net', subject: 'held', text: 'on the wire' })).status, 200);
  await connected;

  server.child.kill('SIGINT');
  await server.waitForOutput(/still stopping: .*SMTP transaction.* up to \d+ min.*signal again \(Ctrl-C\) to stop at once/);
  server.child.kill('SIGINT');
  t.is(await server.exited, 1);
  t.regex(server.output(), /stopping at once/);
});
