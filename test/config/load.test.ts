import test from 'ava';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, loadConfig, redactConfig } from '../../src/config/load.js';
import { tempDir } from '../helpers/temp-dir.js';

test('defaults', (t) => {
  const c = loadConfig({ env: {} });
  t.is(c.http.port, 3000);
  t.is(c.rateLimit.perSecond, 10);
  t.is(c.outbound.port, 25);
  t.is(c.dataDir, './data');
  t.deepEqual(c.dns.servers, []);
  t.false(c.webhooks.allowPrivate);
});

test('every public environment name maps to its key', (t) => {
  const c = loadConfig({
    env: {
      POSTHORN_DATA_DIR: '/tmp/x',
      POSTHORN_HTTP_HOST: '127.0.0.1',
      POSTHORN_HTTP_PORT: '0',
      POSTHORN_HOSTNAME: 'mail.example.com',
      POSTHORN_PUBLIC_URL: 'https://mail.example.com/',
      POSTHORN_RATE_LIMIT: '50',
      POSTHORN_DNS_SERVERS: '127.0.0.1:5353, 9.9.9.9',
      POSTHORN_INBOUND_PORT: '2525',
      POSTHORN_SUBMISSION_PORT: '2587',
      POSTHORN_OUTBOUND_PORT: '2526',
      POSTHORN_WEBHOOKS_ALLOW_PRIVATE: 'true',
    },
  });
  t.is(c.dataDir, '/tmp/x');
  t.is(c.http.host, '127.0.0.1');
  t.is(c.http.port, 0);
  t.is(c.hostname, 'mail.example.com');
  t.is(c.publicUrl, 'https://mail.example.com');
  t.is(c.rateLimit.perSecond, 50);
  t.deepEqual(c.dns.servers, ['127.0.0.1:5353', '9.9.9.9']);
  t.is(c.inbound.port, 2525);
  t.is(c.submission.port, 2587);
  t.is(c.outbound.port, 2526);
  t.true(c.webhooks.allowPrivate);
});

test('TOML file below environment', (t) => {
  const dir = tempDir(t, 'posthorn-cfg-');
  const file = join(dir, 'posthorn.toml');
  writeFileSync(file, 'hostname = "from-file.example"\n[http]\nport = 8080\n[rateLimit]\nperSecond = 20\n');
  const c = loadConfig({ configFile: file, env: { POSTHORN_HTTP_PORT: '9090' } });
  t.is(c.hostname, 'from-file.example');
  t.is(c.http.port, 9090);
  t.is(c.rateLimit.perSecond, 20);
});

test('bad values are clear errors', (t) => {
  t.throws(() => loadConfig({ env: { POSTHORN_HTTP_PORT: 'eighty' } }), { instanceOf: ConfigError, message: /POSTHORN_HTTP_PORT/ });
  t.throws(() => loadConfig({ env: { POSTHORN_DNS_SERVERS: 'not-an-ip' } }), { instanceOf: ConfigError, message: /not-an-ip/ });
  t.throws(() => loadConfig({ env: { POSTHORN_WEBHOOKS_ALLOW_PRIVATE: 'maybe' } }), { instanceOf: ConfigError });
  const dir = tempDir(t, 'posthorn-cfg-');
  writeFileSync(join(dir, 'bad.toml'), '[http]\nprot = 1\n');
  t.throws(() => loadConfig({ configFile: join(dir, 'bad.toml'), env: {} }), { instanceOf: ConfigError, message: /prot/ });
});

test('redaction hides the secret', (t) => {
  const c = loadConfig({ env: { POSTHORN_SECRET: 'hunter2hunter2' } });
  t.false(JSON.stringify(redactConfig(c)).includes('hunter2'));
});

test('outbound SMTP timeouts: defaults are the client pool\'s, environment names map, too small is refused', (t) => {
  const d = loadConfig({ env: {} }).outbound;
  t.is(d.connectTimeoutMs, 30_000);
  t.is(d.greetingTimeoutMs, 30_000);
  t.is(d.socketTimeoutMs, 600_000);
  t.is(d.transactionTimeoutMs, 900_000);
  const c = loadConfig({
    env: {
      POSTHORN_OUTBOUND_CONNECT_TIMEOUT_MS: '1000',
      POSTHORN_OUTBOUND_GREETING_TIMEOUT_MS: '2000',
      POSTHORN_OUTBOUND_SOCKET_TIMEOUT_MS: '3000',
      POSTHORN_OUTBOUND_TRANSACTION_TIMEOUT_MS: '4000',
    },
  }).outbound;
  t.deepEqual([c.connectTimeoutMs, c.greetingTimeoutMs, c.socketTimeoutMs, c.transactionTimeoutMs], [1000, 2000, 3000, 4000]);
  t.throws(() => loadConfig({ env: { POSTHORN_OUTBOUND_SOCKET_TIMEOUT_MS: '5' } }), { instanceOf: ConfigError, message: /socketTimeoutMs/ });
});
