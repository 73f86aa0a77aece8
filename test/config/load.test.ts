import test from 'ava';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, loadConfig, redactConfig, unknownEnvNames } from '../../src/config/load.js';
import { configExample } from '../../src/config/config-example.js';
import { configKeys } from '../../src/config/config-keys.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { tempDir } from '../helpers/temp-dir.js';
import { redactDatabaseUrl } from '../../src/store/pg/pg-url.js';

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

test('a wrong value in the config file is an error even while a variable overrides it (it would stop the server the day the variable goes)', (t) => {
  const dir = tempDir(t, 'posthorn-cfg-');
  const file = join(dir, 'posthorn.toml');
  writeFileSync(file, '[http]\nport = "3000"\n');
  t.throws(() => loadConfig({ configFile: file, env: { POSTHORN_HTTP_PORT: '9090' } }), {
    instanceOf: ConfigError,
    message: new RegExp(`invalid configuration: http\\.port in ${file}: must be a number \\(POSTHORN_HTTP_PORT overrides it for now\\)`),
  });
  // A relay user in the file with its password in the environment (the unit's EnvironmentFile) is no error.
  writeFileSync(file, '[outbound.relay]\nhost = "smtp.example.com"\nuser = "me"\n');
  t.is(loadConfig({ configFile: file, env: { POSTHORN_OUTBOUND_RELAY_PASSWORD: 'pw' } }).outbound.relay.password, 'pw');
});

test('bad values are clear errors', (t) => {
  t.throws(() => loadConfig({ env: { POSTHORN_HTTP_PORT: 'eighty' } }), { instanceOf: ConfigError, message: /POSTHORN_HTTP_PORT/ });
  t.throws(() => loadConfig({ env: { POSTHORN_DNS_SERVERS: 'not-an-ip' } }), { instanceOf: ConfigError, message: /not-an-ip/ });
  t.throws(() => loadConfig({ env: { POSTHORN_WEBHOOKS_ALLOW_PRIVATE: 'maybe' } }), { instanceOf: ConfigError });
  const dir = tempDir(t, 'posthorn-cfg-');
  writeFileSync(join(dir, 'bad.toml'), '[http]\nprot = 1\n');
  t.throws(() => loadConfig({ configFile: join(dir, 'bad.toml'), env: {} }), { instanceOf: ConfigError, message: /prot/ });
  // A section written as a value in the file, with a variable for a key inside it: the section is named.
  writeFileSync(join(dir, 'flat.toml'), 'outbound = 5\n');
  t.throws(() => loadConfig({ configFile: join(dir, 'flat.toml'), env: { POSTHORN_OUTBOUND_PORT: '2525' } }), { instanceOf: ConfigError, message: /outbound: must be a section \(a \[table\] in TOML\)/ });
});

test('a mistyped key in the config file is named with its section and the key it probably meant', (t) => {
  const dir = tempDir(t, 'posthorn-cfg-');
  const load = (text: string) => {
    writeFileSync(join(dir, 'typo.toml'), text);
    return t.throws(() => loadConfig({ configFile: join(dir, 'typo.toml'), env: {} }), { instanceOf: ConfigError })!.message;
  };
  t.regex(load('hostName = "mail.example.com"\n'), /unknown key "hostName" in the top level \(did you mean "hostname"\?\)/);
  t.regex(load('[http]\nprot = 3001\n'), /unknown key "prot" in \[http\] \(did you mean "port"\?\)/);
  t.regex(load('[outbound.relay]\nhots = "smtp.example.com"\n'), /unknown key "hots" in \[outbound\.relay\] \(did you mean "host"\?\)/);
  t.regex(load('[[outbound.sources]]\nname = "ip1"\nlocalAdress = "192.0.2.10"\n'), /unknown key "localAdress" in \[\[outbound\.sources\]\] number 1 \(did you mean "localAddress"\?\)/);
  // Nothing near: named, without a guess.
  const far = load('wibble = 1\n');
  t.regex(far, /unknown key "wibble" in the top level/);
  t.notRegex(far, /did you mean/);
});

// A host, URL or cron setting that cannot work is refused at load time, naming the key, its
// variable and what is wrong: not a bare "Invalid URL" or "getaddrinfo ENOTFOUND" from deep in the start.
test('host, URL and cron settings that cannot work are refused naming the setting and the fault', (t) => {
  const refused: [Record<string, string>, RegExp][] = [
    [{ POSTHORN_HTTP_HOST: 'not a host' }, /http\.host \(POSTHORN_HTTP_HOST\): "not a host" is not an IP address or a host name/],
    [{ POSTHORN_HTTP_HOST: 'http://mail.example.com' }, /http\.host \(POSTHORN_HTTP_HOST\): .* is a URL/],
    [{ POSTHORN_HTTP_HOST: '127.0.0.1:3000' }, /http\.host \(POSTHORN_HTTP_HOST\): .* has a port/],
    [{ POSTHORN_HTTP_HOST: '999.1.1.1' }, /http\.host \(POSTHORN_HTTP_HOST\): "999\.1\.1\.1" is not a valid IP address/],
    [{ POSTHORN_HTTP_HOST: 'fe80::1%eth0' }, /publicUrl \(POSTHORN_PUBLIC_URL\) is empty and cannot be derived from http\.host "fe80::1%eth0"/],
    [{ POSTHORN_INBOUND_HOST: 'mx example' }, /inbound\.host \(POSTHORN_INBOUND_HOST\): "mx example"/],
    [{ POSTHORN_SUBMISSION_HOST: '[::1]:587' }, /submission\.host \(POSTHORN_SUBMISSION_HOST\): .* has a port/],
    [{ POSTHORN_HOSTNAME: 'mail example com' }, /hostname \(POSTHORN_HOSTNAME\): "mail example com"/],
    [{ POSTHORN_PUBLIC_URL: 'mail.example.com' }, /publicUrl \(POSTHORN_PUBLIC_URL\): "mail\.example\.com" is not a URL/],
    [{ POSTHORN_PUBLIC_URL: 'ftp://mail.example.com' }, /publicUrl \(POSTHORN_PUBLIC_URL\): .* must start with https:\/\/ or http:\/\//],
    [{ POSTHORN_PUBLIC_URL: 'https://mail.example.com/?x=1' }, /publicUrl \(POSTHORN_PUBLIC_URL\): .* must not have a query or fragment/],
    [{ POSTHORN_OUTBOUND_RELAY_HOST: 'smtp://relay.example' }, /outbound\.relay\.host \(POSTHORN_OUTBOUND_RELAY_HOST\): .* is a URL/],
    [{ POSTHORN_DATABASE_URL: 'postgres://me:p@ss@db.example:99999/posthorn' }, /store\.url \(POSTHORN_DATABASE_URL\): not a valid URL: check the port/],
    [{ POSTHORN_DOMAINS_RECHECK_UNVERIFIED_CRON: 'every ten minutes' }, /domains\.recheckUnverifiedCron \(POSTHORN_DOMAINS_RECHECK_UNVERIFIED_CRON\): "every ten minutes" is not a cron expression/],
    [{ POSTHORN_OUTBOUND_TLS_REPORTS_CRON: '99 * * * *' }, /outbound\.tlsReports\.cron \(POSTHORN_OUTBOUND_TLS_REPORTS_CRON\): "99 \* \* \* \*" is not a cron expression/],
  ];
  for (const [env, message] of refused) t.throws(() => loadConfig({ env }), { instanceOf: ConfigError, message }, JSON.stringify(env));
  // The database URL's password is never repeated in the message.
  t.false((t.throws(() => loadConfig({ env: { POSTHORN_DATABASE_URL: 'postgres://me:s3cret@db.example:99999/p' } }))?.message ?? '').includes('s3cret'));
  // In the file, the same keys, the same words.
  const dir = tempDir(t, 'posthorn-cfg-');
  writeFileSync(join(dir, 'host.toml'), '[http]\nhost = "http://0.0.0.0:3000"\n');
  t.throws(() => loadConfig({ configFile: join(dir, 'host.toml'), env: {} }), { instanceOf: ConfigError, message: /http\.host \(POSTHORN_HTTP_HOST\): .* is a URL/ });
  // What works is still taken: addresses, names, a trailing dot, a path under the public URL, socket URLs.
  const ok = loadConfig({
    env: {
      POSTHORN_HTTP_HOST: '::',
      POSTHORN_INBOUND_HOST: 'localhost',
      POSTHORN_SUBMISSION_HOST: 'mail-1.internal.',
      POSTHORN_HOSTNAME: 'mx1.example.com',
      POSTHORN_PUBLIC_URL: 'https://example.com/posthorn/',
      POSTHORN_OUTBOUND_RELAY_HOST: '192.0.2.25',
      POSTHORN_DATABASE_URL: 'postgres://me@/posthorn?host=/var/run/postgresql',
      POSTHORN_DOMAINS_RECHECK_UNVERIFIED_CRON: '0 */5 * * * *',
    },
  });
  t.is(ok.publicUrl, 'https://example.com/posthorn');
  t.is(ok.submission.host, 'mail-1.internal.');
});

test('a public URL without http(s)://, or a host name that is not one, is a config error saying what to write', (t) => {
  // new URL() takes "localhost:3000" for a URL of scheme "localhost:": links would be broken.
  for (const url of ['localhost:3000', 'mail.example.com:8080/x', 'ftp://mail.example.com', 'https://']) {
    t.throws(() => loadConfig({ env: { POSTHORN_PUBLIC_URL: url } }), { instanceOf: ConfigError, message: /publicUrl \(POSTHORN_PUBLIC_URL\): / }, url);
  }
  t.is(loadConfig({ env: { POSTHORN_PUBLIC_URL: 'http://192.0.2.10:8080/mail/' } }).publicUrl, 'http://192.0.2.10:8080/mail');
  // The MX and SPF records, the EHLO name and Message-IDs take it as written.
  for (const name of ['https://mail.example.com', 'mail.example.com:25', 'mail example.com', 'bad_host!', '-mx.example.com', '192.0.2.10']) {
    t.throws(() => loadConfig({ env: { POSTHORN_HOSTNAME: name } }), { instanceOf: ConfigError, message: /hostname \(POSTHORN_HOSTNAME\): / }, name);
  }
  for (const name of ['localhost', 'mail.example.com', 'MX-1.Example.com']) t.is(loadConfig({ env: { POSTHORN_HOSTNAME: name } }).hostname, name);
});

test('redaction hides the secret', (t) => {
  const c = loadConfig({ env: { POSTHORN_SECRET: 'hunter2hunter2' } });
  t.false(JSON.stringify(redactConfig(c)).includes('hunter2'));
});

test('the database URL selects PostgreSQL; printed with its password redacted and the rest kept', (t) => {
  const c = loadConfig({ env: { POSTHORN_DATABASE_URL: 'postgres://posthorn:s3cr%40t@db.internal:5433/mail' } });
  t.is(c.store.url, 'postgres://posthorn:s3cr%40t@db.internal:5433/mail');
  const printed = redactConfig(c).store.url;
  t.is(printed, 'postgres://posthorn:[redacted]@db.internal:5433/mail');
  t.false(JSON.stringify(redactConfig(c)).includes('s3cr'));
  // libpq URLs may carry the password as a parameter too (node-postgres reads it there).
  const inQuery = loadConfig({ env: { POSTHORN_DATABASE_URL: 'postgres://posthorn@db.internal/mail?sslmode=require&password=s3cr3t&sslpassword=k3yp4ss' } });
  const shown = redactConfig(inQuery).store.url;
  t.false(shown.includes('s3cr3t') || shown.includes('k3yp4ss'), shown);
  t.regex(shown, /^postgres:\/\/posthorn@db\.internal\/mail\?sslmode=require&password=\[redacted\]&sslpassword=\[redacted\]$/);
  const described = redactDatabaseUrl('postgres://posthorn@db.internal/mail?password=s3cr3t');
  t.false(described.includes('s3cr3t'), described);
  t.is(loadConfig({ env: {} }).store.url, '', 'unset: SQLite under the data dir');
  t.throws(() => loadConfig({ env: { POSTHORN_DATABASE_URL: 'mysql://x@y/z' } }), { message: /store\.url \(POSTHORN_DATABASE_URL\): must be a postgres:\/\/ URL/ });
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

test('a shaping rule\'s idleTimeout is at most 1h: a longer one would overflow the timer and close idle connections at once', (t) => {
  const shaping = (idleTimeout: string) => ({ env: { POSTHORN_OUTBOUND_SHAPING: JSON.stringify([{ mx: 'example.com', idleTimeout }]) } });
  t.is(loadConfig(shaping('1h')).outbound.shaping[0]!.idleTimeout, '1h');
  t.is(loadConfig(shaping('30s')).outbound.shaping[0]!.idleTimeout, '30s');
  for (const long of ['61m', '25d', '30d']) {
    t.throws(() => loadConfig(shaping(long)), { instanceOf: ConfigError, message: /outbound\.shaping.*idleTimeout.*must be at most 1h/ });
  }
  t.throws(() => loadConfig(shaping('soon')), { instanceOf: ConfigError, message: /idleTimeout.*must be a duration/ });
});

test('config.example.toml is what the schema writes: every key, at its default, with its variable', (t) => {
  const committed = readFileSync(new URL('../../../config.example.toml', import.meta.url), 'utf8');
  t.is(committed, configExample(), 'regenerate it with: node bin/posthorn config example > config.example.toml');
  // Uncommented, the example parses to exactly the defaults (publicUrl derived from them, as without a file).
  const dir = tempDir(t, 'posthorn-cfg-');
  const file = join(dir, 'example.toml');
  writeFileSync(file, committed.replace(/^# (\w+ = .*)$/gm, '$1'));
  t.deepEqual(loadConfig({ configFile: file, env: {} }), { ...DEFAULT_CONFIG, publicUrl: 'http://localhost:3000' });
  t.deepEqual(loadConfig({ env: {} }), loadConfig({ configFile: file, env: {} }));
});

test('every key has an environment variable, and each one sets its key (the relay too)', (t) => {
  const keys = configKeys();
  t.is(new Set(keys.map((k) => k.env)).size, keys.length, 'names are unique');
  const c = loadConfig({
    env: {
      POSTHORN_OUTBOUND_RELAY_HOST: 'smtp.relay.example',
      POSTHORN_OUTBOUND_RELAY_PORT: '465',
      POSTHORN_OUTBOUND_RELAY_SECURE: 'implicit',
      POSTHORN_OUTBOUND_RELAY_USER: 'me',
      POSTHORN_OUTBOUND_RELAY_PASSWORD: 'pw',
      POSTHORN_OUTBOUND_MAX_AGE_HOURS: '1.5',
      POSTHORN_INBOUND_COMPLAINT_ADDRESS: 'fbl@example.com',
      POSTHORN_DOMAINS_RECHECK_VERIFIED_CRON: '0 4 * * *',
    },
  });
  t.deepEqual(c.outbound.relay, { host: 'smtp.relay.example', port: 465, secure: 'implicit', user: 'me', password: 'pw' });
  t.is(c.outbound.maxAgeHours, 1.5);
  t.is(c.inbound.complaintAddress, 'fbl@example.com');
  t.is(c.domains.recheckVerifiedCron, '0 4 * * *');
  // Every variable reaches its key: some value its kind accepts moves the key off its default.
  const candidates: Record<string, string[]> = { int: ['7', '2', '1234', '99999'], number: ['12.5'], bool: ['true', 'false'], list: ['127.0.0.1'], string: ['x'] };
  const special: Record<string, string> = {
    publicUrl: 'https://x.example',
    'log.level': 'debug',
    'dns.trustAd': 'always',
    'outbound.relay.secure': 'none',
    'inbound.complaintAddress': 'a@b.example',
    'console.enabled': 'false',
    'store.durability': 'normal',
    'store.url': 'postgres://u:p@db.example:5432/posthorn',
    'domains.recheckUnverifiedCron': '0 * * * *',
    'domains.recheckVerifiedCron': '0 * * * *',
    'outbound.tlsReports.cron': '0 * * * *',
    'outbound.sources': '[{"name":"default","localAddress":"127.0.0.2"}]',
    'outbound.pools': '[{"name":"bulk","sources":["default"]}]',
    'outbound.shaping': '[{"mx":"example.com","messageRate":"5/s"}]',
    'outbound.replyRules': '[{"code":421,"action":"suspend","duration":"5m"}]',
    'submission.authFailureWindow': '1h',
    'store.statementTimeout': '45s',
    // At least the per-host cap's default (16): below it is a config error of its own.
    'webhooks.maxInFlight': '100',
  };
  for (const k of keys) {
    if (/certFile|keyFile/.test(k.path.at(-1)!)) continue; // set in pairs; the schema tests cover them
    const at = (c: unknown) => k.path.reduce<any>((node, p) => node[p], c);
    const moved = (special[k.path.join('.')] ? [special[k.path.join('.')]!] : candidates[k.kind]!).some((raw) => {
      try {
        return JSON.stringify(at(loadConfig({ env: { [k.env]: raw } }))) !== JSON.stringify(at(DEFAULT_CONFIG));
      } catch {
        return false;
      }
    });
    t.true(moved, `${k.env} sets ${k.path.join('.')}`);
  }
});

test('a POSTHORN_* variable that sets nothing is found, with the name it probably meant; the suite\'s own are not', (t) => {
  t.deepEqual(unknownEnvNames({ POSTHORN_SANBOX: 'true', POSTHORN_HTTP_PORT: '3000', POSTHORN_NOT_A_THING: 'x', POSTHORN_TEST_STORE: 'postgres', HOME: '/root' }), [
    { name: 'POSTHORN_NOT_A_THING' },
    { name: 'POSTHORN_SANBOX', near: 'POSTHORN_SANDBOX' },
  ]);
  t.deepEqual(unknownEnvNames({}), []);
});

test('a value out of range is refused in the plain words of the API\'s messages, not the validator\'s', (t) => {
  t.throws(() => loadConfig({ env: { POSTHORN_HTTP_PORT: '99999' } }), { instanceOf: ConfigError, message: 'invalid configuration: http.port (POSTHORN_HTTP_PORT): must be at most 65535' });
});

test('a string left open in the config file is named as that, not as the newline it ran into', (t) => {
  const dir = tempDir(t, 'posthorn-cfg-');
  writeFileSync(join(dir, 'open.toml'), 'hostname = "mail.example.com\nsandbox = true\n');
  t.throws(() => loadConfig({ configFile: join(dir, 'open.toml'), env: {} }), {
    instanceOf: ConfigError,
    message: `config file ${join(dir, 'open.toml')} is not valid TOML: the string on line 1 is not closed (its closing quote is missing)`,
  });
  // A control character inside a line keeps the parser's words.
  writeFileSync(join(dir, 'ctl.toml'), 'hostname = "mail\u0001.example.com"\n');
  t.throws(() => loadConfig({ configFile: join(dir, 'ctl.toml'), env: {} }), { instanceOf: ConfigError, message: /control characters are not allowed in strings at line 1, column 17/ });
});

test('a webhook lease shorter than twice the attempt timeout is refused: the call would be claimed and posted again while its attempt still runs', (t) => {
  const c = loadConfig({ env: { POSTHORN_WEBHOOKS_TIMEOUT_MS: '30000', POSTHORN_WEBHOOKS_LEASE_MS: '60000' } }).webhooks;
  t.deepEqual([c.timeoutMs, c.leaseMs], [30_000, 60_000]);
  t.throws(() => loadConfig({ env: { POSTHORN_WEBHOOKS_TIMEOUT_MS: '30000', POSTHORN_WEBHOOKS_LEASE_MS: '20000' } }), {
    instanceOf: ConfigError,
    message: /webhooks\.leaseMs.*at least twice webhooks\.timeoutMs/,
  });
  t.throws(() => loadConfig({ env: { POSTHORN_WEBHOOKS_TIMEOUT_MS: '60000', POSTHORN_WEBHOOKS_LEASE_MS: '60000' } }), { instanceOf: ConfigError, message: /leaseMs/ });
});

test('the SMTP per-client limits default to 50 (inbound) and 20 (submission) connections and 10 AUTH failures in 15m; bad values are named', (t) => {
  const config = loadConfig({ env: {} });
  t.is(config.inbound.maxConnectionsPerIp, 50);
  t.is(config.submission.maxConnectionsPerIp, 20);
  t.is(config.submission.authFailureLimit, 10);
  t.is(config.submission.authFailureWindow, '15m');
  t.is(loadConfig({ env: {}, overrides: { submission: { maxConnectionsPerIp: 0, authFailureLimit: 0 } } }).submission.maxConnectionsPerIp, 0, '0 turns them off');
  t.throws(() => loadConfig({ env: { POSTHORN_SUBMISSION_AUTH_FAILURE_WINDOW: 'soon' } }), { instanceOf: ConfigError, message: /submission\.authFailureWindow.*must be a duration/ });
  t.throws(() => loadConfig({ env: {}, overrides: { submission: { authFailureWindow: '2d' } } }), { instanceOf: ConfigError, message: /submission\.authFailureWindow.*must be at most 1d/ });
  t.throws(() => loadConfig({ env: {}, overrides: { inbound: { maxConnectionsPerIp: -1 } } }), { instanceOf: ConfigError, message: /inbound\.maxConnectionsPerIp/ });
});

test('exemptNetworks of the SMTP listeners: empty by default, addresses and CIDRs of both families from the file or a comma-separated variable; a bad entry is named with its setting', (t) => {
  const config = loadConfig({ env: {} });
  t.deepEqual([config.inbound.exemptNetworks, config.submission.exemptNetworks], [[], []]);
  const set = loadConfig({ env: { POSTHORN_SUBMISSION_EXEMPT_NETWORKS: '10.0.0.0/8, 192.0.2.7,2001:db8::/32,::ffff:198.51.100.0/120', POSTHORN_INBOUND_EXEMPT_NETWORKS: '::1' } });
  t.deepEqual(set.submission.exemptNetworks, ['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '::ffff:198.51.100.0/120']);
  t.deepEqual(set.inbound.exemptNetworks, ['::1']);
  const bad: [string, RegExp][] = [
    ['10.0.0.0/33', /"10\.0\.0\.0\/33" has a prefix length that is not 0 to 32/],
    ['2001:db8::/129', /not 0 to 128/],
    ['10.0.0/8', /"10\.0\.0\/8" is not an IP address or a network/],
    ['mail.example.com', /is not an IP address or a network/],
    ['10.0.0.0/8/8', /is not an IP address or a network/],
    ['10.0.0.0/', /prefix length/],
    ['fe80::1%eth0', /zone index/],
    ['::ffff:10.0.0.0/8', /IPv4-mapped network shorter than \/96/],
  ];
  for (const [entry, message] of bad) {
    const err = t.throws(() => loadConfig({ env: { POSTHORN_SUBMISSION_EXEMPT_NETWORKS: `127.0.0.1,${entry}` } }), { instanceOf: ConfigError }, entry);
    t.regex(err!.message, /submission\.exemptNetworks \(POSTHORN_SUBMISSION_EXEMPT_NETWORKS\): /, entry);
    t.regex(err!.message, message, entry);
  }
  t.throws(() => loadConfig({ env: {}, overrides: { inbound: { exemptNetworks: ['300.1.2.3'] } } }), { instanceOf: ConfigError, message: /inbound\.exemptNetworks.*"300\.1\.2\.3"/ });
});

test('tracking.machineNetworks: empty by default, a comma-separated variable or a file list, each entry checked and a bad one named with its setting', (t) => {
  t.deepEqual(loadConfig({ env: {} }).tracking.machineNetworks, []);
  t.deepEqual(loadConfig({ env: { POSTHORN_TRACKING_MACHINE_NETWORKS: '192.0.2.0/24, 2001:db8::/32,198.51.100.7' } }).tracking.machineNetworks, ['192.0.2.0/24', '2001:db8::/32', '198.51.100.7']);
  const err = t.throws(() => loadConfig({ env: { POSTHORN_TRACKING_MACHINE_NETWORKS: '192.0.2.0/24,10.0.0.0/33' } }), { instanceOf: ConfigError });
  t.regex(err!.message, /tracking\.machineNetworks \(POSTHORN_TRACKING_MACHINE_NETWORKS\): .*"10\.0\.0\.0\/33" has a prefix length that is not 0 to 32/);
  t.throws(() => loadConfig({ env: {}, overrides: { tracking: { machineNetworks: ['mimecast.example'] } } }), { instanceOf: ConfigError, message: /tracking\.machineNetworks.*"mimecast\.example" is not an IP address/ });
});

test('inbound.lateReportDays: 30 by default, 0 to 365, anything else refused naming it', (t) => {
  t.is(loadConfig({ env: {} }).inbound.lateReportDays, 30);
  t.is(loadConfig({ env: { POSTHORN_INBOUND_LATE_REPORT_DAYS: '0' } }).inbound.lateReportDays, 0);
  t.is(loadConfig({ env: { POSTHORN_INBOUND_LATE_REPORT_DAYS: '365' } }).inbound.lateReportDays, 365);
  for (const bad of ['366', '2.5', 'month']) {
    t.throws(() => loadConfig({ env: { POSTHORN_INBOUND_LATE_REPORT_DAYS: bad } }), { instanceOf: ConfigError, message: /POSTHORN_INBOUND_LATE_REPORT_DAYS/ }, bad);
  }
});

test('webhooks.disableAfterFailures: 30 by default, 0 allowed (never), negative or fractional refused', (t) => {
  t.is(loadConfig({ env: {} }).webhooks.disableAfterFailures, 30);
  t.is(loadConfig({ env: { POSTHORN_WEBHOOKS_DISABLE_AFTER_FAILURES: '0' } }).webhooks.disableAfterFailures, 0);
  for (const bad of ['-1', '2.5', 'many']) {
    t.throws(() => loadConfig({ env: { POSTHORN_WEBHOOKS_DISABLE_AFTER_FAILURES: bad } }), { instanceOf: ConfigError, message: /DISABLE_AFTER_FAILURES|disableAfterFailures/ });
  }
});

test('webhooks.maxInFlight: 64 by default, 1..1024; maxInFlightPerHost above it is a config error naming both', (t) => {
  t.is(loadConfig({ env: {} }).webhooks.maxInFlight, 64);
  t.is(loadConfig({ env: { POSTHORN_WEBHOOKS_MAX_IN_FLIGHT: '1024' } }).webhooks.maxInFlight, 1024);
  t.is(loadConfig({ env: {}, overrides: { webhooks: { maxInFlight: 1, maxInFlightPerHost: 0 } } }).webhooks.maxInFlight, 1);
  for (const bad of ['0', '-1', '2.5', '1025', 'many']) {
    t.throws(() => loadConfig({ env: { POSTHORN_WEBHOOKS_MAX_IN_FLIGHT: bad } }), { instanceOf: ConfigError, message: /WEBHOOKS_MAX_IN_FLIGHT|webhooks\.maxInFlight\b/ }, bad);
  }
  // A larger total lets the per-host cap go higher; a smaller one brings its bound down.
  t.is(loadConfig({ env: { POSTHORN_WEBHOOKS_MAX_IN_FLIGHT: '200', POSTHORN_WEBHOOKS_MAX_IN_FLIGHT_PER_HOST: '150' } }).webhooks.maxInFlightPerHost, 150);
  t.throws(() => loadConfig({ env: { POSTHORN_WEBHOOKS_MAX_IN_FLIGHT: '8' } }), {
    instanceOf: ConfigError,
    message: /webhooks\.maxInFlightPerHost.*16.*webhooks\.maxInFlight \(8\)/,
  });
});

test('webhooks.maxInFlightPerHost: 16 by default, 0 allowed (no cap), negative, fractional or above the 64 in all refused', (t) => {
  t.is(loadConfig({ env: {} }).webhooks.maxInFlightPerHost, 16);
  t.is(loadConfig({ env: { POSTHORN_WEBHOOKS_MAX_IN_FLIGHT_PER_HOST: '0' } }).webhooks.maxInFlightPerHost, 0);
  t.is(loadConfig({ env: {}, overrides: { webhooks: { maxInFlightPerHost: 64 } } }).webhooks.maxInFlightPerHost, 64);
  for (const bad of ['-1', '2.5', '65', 'many']) {
    t.throws(() => loadConfig({ env: { POSTHORN_WEBHOOKS_MAX_IN_FLIGHT_PER_HOST: bad } }), { instanceOf: ConfigError, message: /MAX_IN_FLIGHT_PER_HOST|maxInFlightPerHost/ });
  }
});
