import { spawn } from 'node:child_process';
import net from 'node:net';
import test, { type ExecutionContext } from 'ava';
import type { DeepPartial } from '../../src/config/load.js';
import type { Config } from '../../src/config/defaults.js';
import { ManualClock } from '../../src/lib/clock.js';
import { capturedLog, type CapturedLog } from '../helpers/captured-log.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { ConsoleClient, consoleUser } from '../console/helpers/console-client.js';

// Outbound port 25 blocked (docs/outbound.md, "When port 25 is blocked"): connections to MX hosts
// of several domains that all fail at the TCP level, and none that succeeds, turn on one warning
// (a log line, the console's overview for every team, the operator's queue summary, a gauge);
// the first connection that succeeds clears it. MX hosts that refuse are loopback addresses
// nothing listens on at the outbound port. The walls: one broken MX, a success in the window, a
// relay, and MX hosts that were reached but misbehaved (a 5xx greeting, no greeting at all).

const START = Date.UTC(2026, 2, 2, 9, 0, 0);
const WINDOW_MS = 15 * 60_000;

interface World {
  w: MailWorld;
  log: CapturedLog;
  clock: ManualClock;
  op: string;
}

async function world(t: ExecutionContext, overrides: DeepPartial<Config> = {}): Promise<World> {
  const log = capturedLog();
  const clock = new ManualClock(START);
  const w = await startMailWorld({ clock, logger: log.logger, overrides: { rateLimit: { perSecond: 1_000_000 }, ...overrides } });
  t.teardown(() => w.close());
  const op = (await w.t0.app.services.operatorKeys.create('ops')).token;
  return { w, log, clock, op };
}

/** `domain` has one MX, `host`, at `address`. */
function mx(w: MailWorld, domain: string, host: string, address: string): void {
  w.zone.set(host, 'A', [address]);
  w.zone.set(domain, 'MX', [{ exchange: host, priority: 10 }]);
}

async function send(w: MailWorld, to: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: `News <news@${w.domain.name}>`, to, subject: 'Hi', text: 'Hello' } });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId as string;
}

async function summary(x: World): Promise<any> {
  const res = await x.w.t0.request('GET', '/admin/v1/queue', { key: x.op });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.outboundPort25;
}

async function gauge(w: MailWorld): Promise<number | undefined> {
  const text = await (await fetch(`${w.t0.baseUrl}/metrics`)).text();
  const m = /^posthorn_outbound_port25_blocked (\S+)$/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

const blockedLines = (log: CapturedLog) => log.lines.filter((l) => l.event === 'outbound.port25_blocked');
const clearedLines = (log: CapturedLog) => log.lines.filter((l) => l.event === 'outbound.port25_cleared');

/** A TCP listener on `address` at the outbound port that accepts and never says a word. */
async function silentMx(t: ExecutionContext, address: string, port: number): Promise<void> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(port, address, resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
}

/** A port on `address` that nothing listens on (bound, then closed). */
async function closedPort(address: string): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/*
 * Listeners on `addresses` at the outbound port whose process never accepts: once a listener's
 * accept queue is full, Linux drops further SYNs unanswered, as a firewall that drops port 25
 * does, and a connection attempt ends in the connect timeout. The process listens with a
 * backlog of 1 and then blocks its only thread, so the two connections made here fill it.
 */
async function droppingMx(t: ExecutionContext, addresses: string[], port: number): Promise<void> {
  const script = `
    const net = require('node:net');
    const addresses = ${JSON.stringify(addresses)};
    let listening = 0;
    for (const host of addresses) {
      net.createServer().listen({ host, port: ${port}, backlog: 1 }, () => {
        if (++listening < addresses.length) return;
        process.stdout.write('ready\\n');
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
      });
    }`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the listener process exited (${code})`)));
  });
  const fillers: net.Socket[] = [];
  t.teardown(() => fillers.forEach((s) => s.destroy()));
  for (const host of addresses) {
    for (let i = 0; i < 2; i++) {
      const s = net.connect({ host, port });
      fillers.push(s);
      await new Promise<void>((resolve, reject) => s.once('connect', resolve).once('error', reject));
    }
  }
}

/** Two domains whose MX hosts refuse: two hosts, not enough on their own. */
async function refusedAtTwoHosts(x: World, t: ExecutionContext): Promise<void> {
  mx(x.w, 'one.example', 'mx.one.test', '127.0.0.3');
  mx(x.w, 'two.example', 'mx.two.test', '127.0.0.4');
  for (const to of ['a@one.example', 'a@two.example']) await send(x.w, to);
  await x.w.settle();
  t.like(await summary(x), { state: 'ok', failedHosts: 2, attempts: 2 });
}

async function consolePage(w: MailWorld, email: string, teamId: number): Promise<string> {
  await consoleUser(w.t0.app, email, teamId);
  const c = new ConsoleClient(w.t0.baseUrl);
  const signedIn = await c.signIn(email);
  if (signedIn.status !== 303 && signedIn.status !== 302) throw new Error(`sign-in: ${signedIn.status}`);
  const page = await c.get('/console');
  if (page.status !== 200) throw new Error(`overview: ${page.status}`);
  return page.text;
}

test.serial('MX hosts of three domains refusing connections: one warning, shown everywhere; the first delivery that connects clears it', async (t) => {
  const x = await world(t);
  const { w, log } = x;
  mx(w, 'one.example', 'mx.one.test', '127.0.0.3');
  mx(w, 'two.example', 'mx.two.test', '127.0.0.4');
  mx(w, 'three.example', 'mx.three.test', '127.0.0.5');
  const before = await summary(x);
  t.like(before, { state: 'ok', since: null, failedHosts: 0, lastError: null });
  t.is(await gauge(w), 0);

  for (const d of ['one', 'two', 'three']) await send(w, `a@${d}.example`);
  await w.settle();

  const lines = blockedLines(log);
  t.is(lines.length, 1, 'one warning line, not one per attempt');
  t.is(lines[0].level, 40);
  t.regex(lines[0].msg, new RegExp(`^outbound port ${w.sink.port} looks blocked: no connection to any MX succeeded in 15 minutes \\(3 attempts to 3 hosts failed to connect, such as mx\\.\\w+\\.test\\[127\\.0\\.0\\.[345]\\]: connection refused\\)\\. Many cloud providers block port 25; ask yours to open it, or send through a relay \\(\\[outbound\\.relay\\], docs/outbound\\.md\\)$`));
  t.like(lines[0], { attempts: 3, failedHosts: 3 });

  const s = await summary(x);
  t.like(s, { state: 'suspected-blocked', since: new Date(START).toISOString(), failedHosts: 3, attempts: 3 });
  t.regex(s.lastError, /^mx\.\w+\.test\[127\.0\.0\.[345]\]: connection refused$/);
  t.is(await gauge(w), 1);

  // Every team on the node sees it: it stops every team's mail.
  const other = await w.t0.app.services.teams.create('Other team');
  for (const [email, teamId] of [['me@one.dev', w.t0.teamId], ['you@other.dev', other]] as const) {
    const page = await consolePage(w, email, teamId);
    t.regex(page, /Outbound port \d+ looks blocked/, email);
    t.regex(page, /relay/, email);
    // In counts: the hosts are the MXes other teams' recipients use.
    t.notRegex(page, /mx\.(one|two|three)\.test|127\.0\.0\.[345]/, email);
  }

  // More failures while it is on: still one line, the counts grow.
  await send(w, 'b@one.example');
  await w.settle();
  t.is(blockedLines(log).length, 1);
  t.like(await summary(x), { state: 'suspected-blocked', attempts: 4, failedHosts: 3 });

  // One connection that works.
  await send(w, 'c@example.net');
  await w.settle();
  t.is(w.sink.messages.length, 1);
  const cleared = clearedLines(log);
  t.is(cleared.length, 1);
  t.is(cleared[0].level, 30);
  t.regex(cleared[0].msg, /^outbound port \d+ works again: connected to mx\.sink\.test\[127\.0\.0\.1\]/);
  t.like(await summary(x), { state: 'ok', since: null, failedHosts: 0, lastError: null });
  t.is(await gauge(w), 0);
  t.notRegex(await consolePage(w, 'late@one.dev', w.t0.teamId), /looks blocked/);
});

test.serial('one broken MX, however many domains use it, is not a blocked port', async (t) => {
  const x = await world(t);
  for (const d of ['one', 'two', 'three']) mx(x.w, `${d}.example`, 'mx.broken.test', '127.0.0.3');
  for (const d of ['one', 'two', 'three']) await send(x.w, `a@${d}.example`);
  await x.w.settle();
  t.like(await summary(x), { state: 'ok', failedHosts: 1 });
  t.is(blockedLines(x.log).length, 0);
  t.is(await gauge(x.w), 0);
});

test.serial('a connection that succeeded in the last 15 minutes keeps it off; once it is older, the failures count', async (t) => {
  const x = await world(t);
  const { w, clock } = x;
  await send(w, 'first@example.net');
  await w.settle();
  t.is(w.sink.messages.length, 1);
  clock.advance(WINDOW_MS - 60_000);
  mx(w, 'one.example', 'mx.one.test', '127.0.0.3');
  mx(w, 'two.example', 'mx.two.test', '127.0.0.4');
  mx(w, 'three.example', 'mx.three.test', '127.0.0.5');
  for (const d of ['one', 'two', 'three']) await send(w, `a@${d}.example`);
  await w.settle();
  t.like(await summary(x), { state: 'ok', failedHosts: 3 });
  t.is(blockedLines(x.log).length, 0);

  // The success is now older than the window; the retries fail again.
  clock.advance(5 * 60_000);
  await w.settle();
  t.is(blockedLines(x.log).length, 1);
  t.like(await summary(x), { state: 'suspected-blocked' });
});

test.serial('with a relay, nothing is watched: the relay failing is reported as it is today', async (t) => {
  // The relay is an address and port nothing listens on: every attempt fails to connect.
  const port = await closedPort('127.0.0.3');
  const x = await world(t, { outbound: { relay: { host: '127.0.0.3', port, secure: 'none' } } });
  const { w } = x;
  const ids = [];
  for (const to of ['a@example.net', 'a@example.org', 'b@example.net']) ids.push(await send(w, to));
  await w.settle();
  const events = (await w.t0.request('GET', `/v1/emails/${ids[0]}`)).body.emailEvents as { status: string }[];
  t.true(events.some((e) => e.status === 'DELIVERY_DELAYED'), 'the relay was tried and failed');
  t.like(await summary(x), { state: 'ok', failedHosts: 0, attempts: 0, lastError: null });
  t.is(blockedLines(x.log).length, 0);
  t.is(await gauge(w), 0);
});

test.serial('an MX that answers its greeting with 554 was reached: not a blocked port', async (t) => {
  const x = await world(t);
  const { w } = x;
  const refusing = await w.startSecondSink('greets.example', { onConnect: () => ({ code: 554, message: 'no service here' }) });
  t.is(refusing.host, '127.0.0.2');
  await refusedAtTwoHosts(x, t);
  await send(w, 'a@greets.example');
  await w.settle();
  t.is(refusing.messages.length, 0);
  // Counted as a failure it would have made three hosts of three domains.
  t.like(await summary(x), { state: 'ok', failedHosts: 0 });
  t.is(blockedLines(x.log).length, 0);
});

test.serial('an MX that accepts the connection and never greets was reached (a greeting timeout): not a blocked port', async (t) => {
  const x = await world(t, { outbound: { greetingTimeoutMs: 300 } });
  const { w } = x;
  await silentMx(t, '127.0.0.2', w.sink.port);
  mx(w, 'silent.example', 'mx.silent.test', '127.0.0.2');
  await refusedAtTwoHosts(x, t);
  const id = await send(w, 'a@silent.example');
  await w.settle();
  const events = (await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents as { status: string }[];
  t.true(events.some((e) => e.status === 'DELIVERY_DELAYED'), 'the silent MX was tried and timed out');
  t.like(await summary(x), { state: 'ok', failedHosts: 0 });
  t.is(blockedLines(x.log).length, 0);
});

test.serial('MX hosts that never answer the connection attempt (a connect timeout, as a firewall that drops port 25 gives) look blocked too', async (t) => {
  const x = await world(t, { outbound: { connectTimeoutMs: 150, greetingTimeoutMs: 150 } });
  const { w, log } = x;
  await droppingMx(t, ['127.0.0.3', '127.0.0.4', '127.0.0.5'], w.sink.port);
  mx(w, 'one.example', 'mx.one.test', '127.0.0.3');
  mx(w, 'two.example', 'mx.two.test', '127.0.0.4');
  mx(w, 'three.example', 'mx.three.test', '127.0.0.5');
  const ids = [];
  for (const d of ['one', 'two', 'three']) ids.push(await send(w, `a@${d}.example`));
  await w.settle();
  const events = (await w.t0.request('GET', `/v1/emails/${ids[0]}`)).body.emailEvents as { status: string }[];
  t.true(events.some((e) => e.status === 'DELIVERY_DELAYED'), 'the MX was tried and the attempt deferred');
  const lines = blockedLines(log);
  t.is(lines.length, 1);
  t.regex(lines[0].msg, /\(3 attempts to 3 hosts failed to connect, such as mx\.\w+\.test\[127\.0\.0\.[345]\]: connect timeout\)/);
  const s = await summary(x);
  t.like(s, { state: 'suspected-blocked', failedHosts: 3, attempts: 3 });
  t.regex(s.lastError, /^mx\.\w+\.test\[127\.0\.0\.[345]\]: connect timeout$/);
  t.is(await gauge(w), 1);
});
