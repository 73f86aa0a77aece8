import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import test from 'ava';
import pg from 'pg';
import { ManualClock } from '../../src/lib/clock.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { startMailWorld, sendBody } from '../helpers/mail-world.js';
import { startPgServer, type PgServer } from '../helpers/pg-server.js';
import { loopbackEnv, startPosthorn } from '../proof/helpers/posthorn-process.js';

// A PostgreSQL store that is not there: down when Posthorn starts (a clear error, retried with
// a growing pause, not a crash loop) and gone under load (sends answer 500 "not stored, retry
// later" as on a full disk, /health says degraded, and the service recovers by itself when the
// server is back; nothing it accepted is lost). Each test has a PostgreSQL server of its own,
// since it stops it.

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));
const NOT_STORED = /could not store this request .*nothing was accepted, retry later/;

async function serverWithDatabase(t: { teardown(fn: () => Promise<void>): void }): Promise<{ server: PgServer; url: string }> {
  const server = await startPgServer();
  t.teardown(() => server.stop());
  const admin = new pg.Client({ connectionString: server.adminUrl });
  await admin.connect();
  await admin.query('create database posthorn_outage');
  await admin.end();
  const url = new URL(server.adminUrl);
  url.pathname = '/posthorn_outage';
  // A password in the URL: it must never show in a message or a log line.
  url.password = 'pw-never-shown';
  return { server, url: url.toString() };
}

test('a store that goes away under load: sends answer 500 "not stored, retry later"; back, the service recovers by itself and delivers everything it accepted', async (t) => {
  t.timeout(120_000);
  const { server, url } = await serverWithDatabase(t);
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 9, 0, 0));
  const w = await startMailWorld({ clock, overrides: { store: { url, pool: { connectTimeoutMs: 2000 } }, rateLimit: { perSecond: 1_000_000 } } });
  t.teardown(() => w.close());

  const accepted: string[] = [];
  const refused: { status: number; body: any }[] = [];
  let n = 0;
  let running = true;
  let onAnswer = () => undefined as void;
  const worker = async () => {
    while (running) {
      const i = n++;
      const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to: `load${i}@example.net`, subject: `load ${i}` }) });
      if (res.status === 200) accepted.push(res.body.emailId);
      else refused.push({ status: res.status, body: res.body });
      onAnswer();
    }
  };
  const until = (cond: () => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (!cond()) return;
        onAnswer = () => undefined;
        resolve();
      };
      onAnswer = check;
      check();
    });
  const workers = Array.from({ length: 4 }, worker);

  await until(() => accepted.length >= 20);
  await server.pause();
  const acceptedAtOutage = accepted.length;
  await until(() => refused.length >= 20);
  t.true(
    refused.every((r) => r.status === 500 && r.body?.error?.code === 'INTERNAL_SERVER_ERROR' && NOT_STORED.test(r.body.error.message)),
    JSON.stringify(refused.find((r) => !(r.status === 500 && NOT_STORED.test(r.body?.error?.message ?? '')))),
  );
  const health = await w.t0.request('GET', '/health', { key: null });
  t.is(health.status, 503);
  t.like(health.body, { status: 'degraded', store: 'error' });
  // The scrape still answers (what the store holds left out of it), so the rest can be seen.
  const scrape = await fetch(`${w.t0.baseUrl}/metrics`);
  t.is(scrape.status, 200);
  const exposition = await scrape.text();
  t.regex(exposition, /^posthorn_http_requests_total\{method="POST",route="\/v1\/emails",status="500"\} \d+$/m);
  t.notRegex(exposition, /^posthorn_queue_messages\{/m);

  await server.resume();
  const refusedAtReturn = refused.length;
  await until(() => accepted.length >= acceptedAtOutage + 20);
  running = false;
  await Promise.all(workers);
  t.log(`${accepted.length} accepted (${acceptedAtOutage} before the outage), ${refused.length} refused with 500 during it (${refused.length - refusedAtReturn} while it came back)`);
  t.is((await w.t0.request('GET', '/health', { key: null })).status, 200);

  // Every accepted email reaches the MX: results the outage kept from being recorded are sent
  // again once their lease runs out (at least once, never lost).
  await w.settle();
  clock.advance(w.t0.config.outbound.leaseMs + 60_000);
  await w.settle();
  const delivered = new Set(w.sink.messages.map((m) => /^X-Posthorn-Email-ID:\s*(\S+)/im.exec(m.raw.toString('latin1'))?.[1]));
  t.deepEqual(accepted.filter((id) => !delivered.has(id)), []);
  for (const id of accepted.slice(-3)) t.is((await w.t0.request('GET', `/v1/emails/${id}`)).body.latestStatus, 'DELIVERED');
});

test('a store that is down at start is a clear error and a retry, not a crash: serve waits for it; migrate says so and exits', async (t) => {
  t.timeout(120_000);
  const { server, url } = await serverWithDatabase(t);
  await server.pause();
  const target = /127\.0\.0\.1:\d+\/posthorn_outage/;

  // An admin command does not wait: one clear line, exit 1.
  const migrate = await t.throwsAsync(run(process.execPath, [BIN, 'migrate'], { env: { PATH: process.env.PATH!, POSTHORN_DATABASE_URL: url } }));
  const stderr = (migrate as unknown as { stderr: string }).stderr;
  t.regex(stderr, /^posthorn: the PostgreSQL store at 127\.0\.0\.1:\d+\/posthorn_outage cannot be reached: /m);
  t.notRegex(stderr, /pw-never-shown/);

  // serve retries with a growing pause, logging each failure, and starts once the store is up.
  const dataDir = mkdtempSync(join(tmpdir(), 'posthorn-outage-'));
  const zone = await startDnsZone();
  t.teardown(async () => {
    await zone.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  let failures = 0;
  let sawTwo!: () => void;
  const twoFailures = new Promise<void>((resolve) => (sawTwo = resolve));
  const starting = startPosthorn({
    env: loopbackEnv({ dataDir, dnsServer: zone.server, sinkPort: 9 }, { POSTHORN_DATABASE_URL: url }),
    expectKey: true,
    onOutput: (out) => {
      failures = out.match(/"event":"store\.unavailable"/g)?.length ?? 0;
      if (failures >= 2) sawTwo();
    },
  });
  await twoFailures;
  await server.resume();
  const node = await starting;
  t.teardown(() => node.kill());
  const log = node.output();
  t.regex(log, /cannot be reached \(.*\); retrying in 1 s/);
  t.regex(log, /retrying in 2 s/, 'the pause grows');
  t.regex(log, target);
  t.notRegex(log, /pw-never-shown/);
  const health = await fetch(`http://127.0.0.1:${node.port}/health`);
  t.is(health.status, 200);
  t.like(await health.json(), { status: 'ok', store: 'ok' });
  t.is(node.child.exitCode, null, 'the same process: it waited instead of exiting');
});
