import test from 'ava';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTransport, type Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import { startDnsZone } from '../helpers/dns-zone.js';
import { startSmtpSink, type SinkMessage } from '../helpers/smtp-sink.js';
import { CrashObserver, publishDomainRecords } from './helpers/crash-observer.js';
import { apiClient, loopbackEnv, startPosthorn, type PosthornProcess } from './helpers/posthorn-process.js';

// Crash proof for the SMTP side: `posthorn serve` is killed with SIGKILL twice while SMTP
// submission clients and remote MTAs delivering to a receiving domain are both mid-stream, and
// restarted on the same data dir each time. The clients retry what a kill cut (a connection
// error, or a 4xx) as a real MTA does. Then: every submitted message that got a 250 reached the
// MX with its content, and every inbound message that got a 250 is stored once and readable
// through the API with its content. A submission re-sent after a cut may be stored and delivered
// twice (SMTP has no idempotency key: at least once), and is reported; an inbound message re-sent
// after a cut is recognised and stored once (inbound.md, Guarantees and limits).

// Sized for well under 60 s on a 2-core machine shared with other jobs.
const SUBMISSIONS = 300;
const INBOUND = 300;
/** Concurrent clients of each kind. */
const CLIENTS = 4;
/** Safety nets against a hang; every wait ends on an event long before on a healthy run. */
const PHASE_TIMEOUT_MS = 60_000;
/** A message refused with a 4xx by a live server is tried again, but not forever. */
const MAX_ATTEMPTS = 20;
/** 250s of each kind a process must give before it is killed. */
const MIN_PROGRESS = 10;

const HOSTNAME = 'mx.smtp-crash.test';
const SENDER_DOMAIN = 'smtp-crash-send.dev';
const RECEIVING_DOMAIN = 'smtp-crash-inbox.dev';
const RCPT_DOMAIN = 'smtp-rcpt.example';
const REMOTE_DOMAIN = 'remote-mta.example';
const MX = 'mx.smtp-crash-sink.test';

interface Item {
  tag: string;
  rcpt: string;
  state: 'pending' | 'accepted' | 'refused';
  attempts: number;
  /** Attempts a kill cut (a connection error while the server was being killed). */
  cuts: number;
  /** The ids in the 250 ("queued as ..."). */
  ids: string[];
  /** Accepted after a cut (the cut attempt may have been stored too). */
  acceptedAfterCut: boolean;
  /** When the kill that last cut it came. */
  cutAt?: number;
  refusal?: string;
}

const newItem = (tag: string, rcpt: string): Item => ({ tag, rcpt, state: 'pending', attempts: 0, cuts: 0, ids: [], acceptedAfterCut: false });

/** The raw bytes an MTA relays to the receiving domain: built once, so every retry sends the same message. */
function inboundMessage(tag: string, rcpt: string): Buffer {
  return Buffer.from(
    [
      `From: Remote Sender <sender@${REMOTE_DOMAIN}>`,
      `To: <${rcpt}>`,
      `Subject: inbound ${tag}`,
      `Message-ID: <${tag}.proof@${REMOTE_DOMAIN}>`,
      'Date: Mon, 23 Nov 2026 09:00:00 +0000',
      'MIME-Version: 1.0',
      'Content-Type: text/plain; charset=utf-8',
      '',
      `Body of inbound ${tag}.`,
      '',
    ].join('\r\n'),
  );
}

/**
 * Sends the pending items with `clients` concurrent connections to one process, until each is
 * answered or the process is being killed (then what a kill cut stays pending for the next run).
 */
async function runClients(
  items: Item[],
  o: { clients: number; dying: () => boolean; transport: () => Transporter<SMTPTransport.SentMessageInfo>; send: (tx: Transporter<SMTPTransport.SentMessageInfo>, item: Item) => Promise<SMTPTransport.SentMessageInfo>; onAnswer: () => void },
): Promise<void> {
  const queue = items.filter((i) => i.state === 'pending');
  const worker = async () => {
    const tx = o.transport();
    try {
      for (let item = queue.shift(); item; item = queue.shift()) {
        item.attempts++;
        try {
          const info = await o.send(tx, item);
          item.state = 'accepted';
          item.ids = /queued as (.*)$/.exec(info.response)?.[1]?.trim().split(/\s+/) ?? [];
          item.acceptedAfterCut = item.cuts > 0;
        } catch (err) {
          const code = (err as { responseCode?: number }).responseCode;
          if (code && code >= 500) {
            item.state = 'refused';
            item.refusal = `${code} ${(err as Error).message}`;
          } else if (!code && o.dying()) {
            // Cut by the kill: the next process gets it again.
            item.cuts++;
            item.cutAt = Date.now();
            return;
          } else if (item.attempts >= MAX_ATTEMPTS) {
            item.state = 'refused';
            item.refusal = `gave up after ${item.attempts} attempts: ${(err as Error).message}`;
          } else {
            queue.push(item);
          }
        }
        o.onAnswer();
      }
    } finally {
      tx.close();
    }
  };
  await Promise.all(Array.from({ length: o.clients }, worker));
}

test('SIGKILL twice with SMTP submission and inbound mail in flight: every 250 is stored, delivered or readable', async (t) => {
  t.timeout(180_000);
  const started = Date.now();
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const zone = await startDnsZone();
  const seen = new CrashObserver(() => undefined);
  /** Sink copies per submission tag whose subject and body carry that tag. */
  const sinkContent = new Map<string, number>();
  const onSink = (msg: SinkMessage) => {
    const text = msg.raw.toString('latin1');
    const tag = /^Subject: submission (s\d+)$/m.exec(text)?.[1];
    if (tag && text.includes(`Body of submission ${tag}.`)) sinkContent.set(tag, (sinkContent.get(tag) ?? 0) + 1);
    seen.onSinkMessage(msg);
    return undefined;
  };
  // No STARTTLS on the MX, and none from the remote MTAs: TLS is not what this test is about.
  const sink = await startSmtpSink({ hostname: MX, starttls: false, onData: onSink });
  zone.set(MX, 'A', ['127.0.0.1']);
  zone.set(RCPT_DOMAIN, 'MX', [{ exchange: MX, priority: 10 }]);
  zone.set(REMOTE_DOMAIN, 'TXT', ['v=spf1 ip4:127.0.0.1 -all']);

  const dir = mkdtempSync(join(tmpdir(), 'posthorn-smtp-crash-'));
  const configFile = join(dir, 'posthorn.toml');
  // Both SMTP listeners on loopback only (they have no environment variable for the host).
  writeFileSync(configFile, '[inbound]\nhost = "127.0.0.1"\n\n[submission]\nhost = "127.0.0.1"\n');
  const env = loopbackEnv({ dataDir: join(dir, 'data'), dnsServer: zone.server, sinkPort: sink.port, hostname: HOSTNAME }, { POSTHORN_RATE_LIMIT: '1000000' });
  let server: PosthornProcess = await startPosthorn({ env, configFile, expectKey: true });
  t.teardown(async () => {
    await server.kill();
    await Promise.all([sink.close(), zone.close()]);
    rmSync(dir, { recursive: true, force: true });
  });
  const api = apiClient(() => server, server.key!);
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await api(method, path, body);
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };

  // ---- Set up as docs/inbound.md describes: a verified sending domain and a key bound to it
  // as the submission password; a verified domain with receiving on.
  const domains: Record<string, any> = {};
  for (const name of [SENDER_DOMAIN, RECEIVING_DOMAIN]) {
    const domain = await ok('POST', '/v1/domains', { name, region: 'local' });
    publishDomainRecords(zone, domain);
    await ok('PUT', `/v1/domains/${domain.id}/verify`);
    domains[name] = await ok('GET', `/v1/domains/${domain.id}`);
    t.is(domains[name].status, 'SUCCESS', `${name} is verified`);
  }
  publishDomainRecords(zone, await ok('PATCH', `/v1/domains/${domains[RECEIVING_DOMAIN].id}`, { receiving: true }));
  const smtpKey = (await ok('POST', '/v1/apiKeys', { name: 'smtp app', permission: 'SENDING', domainId: domains[SENDER_DOMAIN].id })).token as string;
  const ca = readFileSync(join(dir, 'data', 'tls', 'self-signed-cert.pem'), 'utf8');

  const submissions = Array.from({ length: SUBMISSIONS }, (_, i) => newItem(`s${i}`, `s${i}@${RCPT_DOMAIN}`));
  const inbound = Array.from({ length: INBOUND }, (_, i) => newItem(`i${i}`, `in-i${i}@${RECEIVING_DOMAIN}`));
  const inboundRaw = new Map(inbound.map((i) => [i.tag, inboundMessage(i.tag, i.rcpt)]));
  const accepted = (items: Item[]) => items.filter((i) => i.state === 'accepted').length;
  const snapshot = () =>
    `${elapsed()}: submissions accepted ${accepted(submissions)}/${SUBMISSIONS}, inbound accepted ${accepted(inbound)}/${INBOUND}, ` +
    `sink ${seen.sinkMessages} messages (${seen.deliveries.size} emails)`;

  /** One run of both kinds of clients against the current process; resolves once every client stopped. */
  let dying = false;
  const runBoth = () => {
    dying = false;
    const ports = server.smtp;
    const submitting = runClients(submissions, {
      clients: CLIENTS,
      dying: () => dying,
      onAnswer: () => seen.tick(),
      // A mail app on 587: STARTTLS required, trusting the server's self-signed pair, the key as password.
      transport: () =>
        createTransport({
          host: '127.0.0.1',
          port: ports.submission,
          secure: false,
          requireTLS: true,
          tls: { ca, servername: HOSTNAME },
          auth: { user: 'apikey', pass: smtpKey },
          pool: true,
          maxConnections: 1,
          maxMessages: Infinity,
        } as SMTPTransport.Options),
      send: (tx, item) =>
        tx.sendMail({
          from: `App <app@${SENDER_DOMAIN}>`,
          to: item.rcpt,
          subject: `submission ${item.tag}`,
          text: `Body of submission ${item.tag}.`,
          messageId: `<${item.tag}.proof@${SENDER_DOMAIN}>`,
        }),
    });
    const delivering = runClients(inbound, {
      clients: CLIENTS,
      dying: () => dying,
      onAnswer: () => seen.tick(),
      // A remote MTA relaying to the receiving domain's MX.
      transport: () =>
        createTransport({ host: '127.0.0.1', port: ports.inbound, secure: false, ignoreTLS: true, name: `mta.${REMOTE_DOMAIN}`, pool: true, maxConnections: 1, maxMessages: Infinity } as SMTPTransport.Options),
      send: (tx, item) => tx.sendMail({ envelope: { from: `sender@${REMOTE_DOMAIN}`, to: [item.rcpt] }, raw: inboundRaw.get(item.tag)! }),
    });
    return Promise.all([submitting, delivering]);
  };
  const killDuring = async (running: Promise<unknown>) => {
    dying = true;
    await server.kill();
    await running;
  };
  const runs: string[] = [];

  /**
   * A kill point: one kind reached its share of 250s (the first to get there, so neither kind
   * has finished whatever their relative speed) and both got some since the last start.
   */
  const killPoint = (share: number, since: { s: number; i: number }) => () =>
    (accepted(submissions) >= SUBMISSIONS * share || accepted(inbound) >= INBOUND * share) &&
    accepted(submissions) >= since.s + MIN_PROGRESS &&
    accepted(inbound) >= since.i + MIN_PROGRESS;
  const progress = () => ({ s: accepted(submissions), i: accepted(inbound) });

  // ---- Run 1: kill once a quarter of either kind has its 250.
  let running = runBoth();
  await seen.until(killPoint(1 / 4, progress()), () => `the first kill point: ${snapshot()}`, PHASE_TIMEOUT_MS);
  const atKill1 = snapshot();
  const inFlight1 = accepted(submissions) < SUBMISSIONS && accepted(inbound) < INBOUND;
  await killDuring(running);
  runs.push(`kill 1 at ${atKill1}`);
  t.true(inFlight1, 'the first kill came while both submissions and inbound mail were being accepted');

  // ---- Run 2: restart on the same data dir; the clients retry what was cut; kill again once
  // two thirds of either kind is in and the MX has had more mail since.
  server = await startPosthorn({ env, configFile });
  runs.push(`restart 1 at ${elapsed()}`);
  const sinkAtRestart = seen.sinkMessages;
  const atRestart = progress();
  running = runBoth();
  const second = killPoint(2 / 3, atRestart);
  await seen.until(() => second() && seen.sinkMessages > sinkAtRestart, () => `the second kill point: ${snapshot()}`, PHASE_TIMEOUT_MS);
  const atKill2 = snapshot();
  const inFlight2 = accepted(submissions) < SUBMISSIONS && accepted(inbound) < INBOUND;
  await killDuring(running);
  runs.push(`kill 2 at ${atKill2}`);
  t.true(inFlight2, 'the second kill came while both submissions and inbound mail were being accepted');

  // ---- Run 3: restart and let the clients finish.
  server = await startPosthorn({ env, configFile });
  runs.push(`restart 2 at ${elapsed()}`);
  await runBoth();
  runs.push(`clients done at ${snapshot()}`);
  const refused = [...submissions, ...inbound].filter((i) => i.state !== 'accepted').map((i) => ({ tag: i.tag, state: i.state, refusal: i.refusal }));
  t.deepEqual(refused, [], 'every message got its 250 in the end');

  // ---- Submissions: wait until every stored email of the sending domain reached the MX (the queue is empty).
  const stored = (await ok('GET', `/v1/emails?limit=1&domainId=${domains[SENDER_DOMAIN].id}`)).count as number;
  const acceptedIds = submissions.flatMap((s) => s.ids);
  const missingAtSink = () => acceptedIds.filter((id) => !seen.deliveries.has(id));
  await seen.until(() => seen.deliveries.size >= stored, () => `the queue to empty: ${snapshot()}, stored ${stored}`, PHASE_TIMEOUT_MS);
  runs.push(`queue empty at ${snapshot()}`);
  t.deepEqual(
    submissions.filter((s) => !sinkContent.get(s.tag)).map((s) => ({ tag: s.tag, reply: s.ids, cuts: s.cuts })),
    [],
    'every submission answered 250 reached the MX with its subject and body',
  );
  t.deepEqual(missingAtSink(), [], 'every email id a 250 named reached the MX');
  t.is(seen.unreadable, 0, 'every delivered message carried its email id');
  // Two emails for one message only when a kill cut an attempt: the cut one was stored, its 250 lost.
  const idsAtSink = (s: Item) => seen.idsByRecipient.get(s.rcpt)?.size ?? 0;
  const storedTwice = submissions.filter((s) => idsAtSink(s) > 1);
  t.deepEqual(
    storedTwice.filter((s) => idsAtSink(s) > 1 + s.cuts).map((s) => ({ tag: s.tag, emails: idsAtSink(s), cuts: s.cuts })),
    [],
    'a submission became more than one email only through retries of cut attempts',
  );
  t.is(stored, seen.deliveries.size, 'the MX got every stored email, and nothing else');
  t.true(stored >= SUBMISSIONS && stored - SUBMISSIONS <= submissions.reduce((n, s) => n + s.cuts, 0), `stored ${stored}: one per message plus at most one per cut attempt`);

  // ---- Inbound: every 250 is stored, once, readable with its content.
  const receivingId = domains[RECEIVING_DOMAIN].id as number;
  const list: any[] = [];
  for (let page = 1; ; page++) {
    const body = await ok('GET', `/v1/receivedEmails?limit=100&page=${page}&domainId=${receivingId}`);
    list.push(...body.receivedEmails);
    if (!body.hasMore) break;
  }
  const byTag = new Map<string, any[]>();
  for (const r of list) {
    const tag = /^inbound (i\d+)$/.exec(r.subject)?.[1] ?? '?';
    byTag.set(tag, [...(byTag.get(tag) ?? []), r]);
  }
  t.deepEqual(
    inbound.filter((i) => !byTag.has(i.tag)).map((i) => i.tag),
    [],
    'every inbound message answered 250 is stored',
  );
  t.deepEqual(
    [...byTag].filter(([, rows]) => rows.length !== 1).map(([tag, rows]) => ({ tag, copies: rows.length })),
    [],
    'each inbound message is stored once, retries after a cut included',
  );
  t.deepEqual(
    inbound.filter((i) => i.ids.length !== 1 || byTag.get(i.tag)?.[0]?.id !== i.ids[0]).map((i) => ({ tag: i.tag, reply: i.ids, stored: byTag.get(i.tag)?.map((r) => r.id) })),
    [],
    "each inbound 250 named the stored copy's id",
  );
  const wrongContent: unknown[] = [];
  for (const i of inbound) {
    const id = byTag.get(i.tag)?.[0]?.id;
    if (!id) continue;
    const r = await ok('GET', `/v1/receivedEmails/${id}`);
    const good =
      r.subject === `inbound ${i.tag}` &&
      r.text?.trim() === `Body of inbound ${i.tag}.` &&
      r.messageId === `<${i.tag}.proof@${REMOTE_DOMAIN}>` &&
      JSON.stringify(r.envelope) === JSON.stringify({ mailFrom: `sender@${REMOTE_DOMAIN}`, rcptTo: [i.rcpt] });
    if (!good) wrongContent.push({ tag: i.tag, subject: r.subject, text: r.text, messageId: r.messageId, envelope: r.envelope });
  }
  t.deepEqual(wrongContent, [], 'every stored inbound message reads back with its content');

  // A retry whose copy is older than the kill that cut it: the killed process had stored it and
  // its 250 was lost; the retry was recognised and answered with that copy.
  const recognised = inbound.filter((i) => i.cutAt !== undefined && Date.parse(byTag.get(i.tag)?.[0]?.createdAt) <= i.cutAt).length;
  const cuts = (items: Item[]) => items.reduce((n, i) => n + i.cuts, 0);
  runs.push(
    `submissions: ${SUBMISSIONS} messages, ${accepted(submissions)} answered 250 (${submissions.filter((s) => s.acceptedAfterCut).length} after a cut), ${cuts(submissions)} attempts cut; ` +
      `${stored} emails stored and delivered; duplicates: ${storedTwice.length} messages stored twice after a cut, ${seen.duplicateDeliveries()} repeated deliveries of one email`,
    `inbound: ${INBOUND} messages, ${accepted(inbound)} answered 250 (${inbound.filter((i) => i.acceptedAfterCut).length} after a cut), ${cuts(inbound)} attempts cut (${recognised} of them stored before the kill, recognised on retry); ${list.length} stored, readable through the API`,
    `wall time ${elapsed()}`,
  );
  for (const line of runs) t.log(line);
});
