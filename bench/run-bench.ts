// npm run bench: measures Posthorn's speed on this machine (a benchmark, never a test).
//  1. API acceptance: POST /v1/emails from a separate load process (rate limit raised; the
//     delivery engine paused so it does not compete), rate and latency p50/p99.
//  2. End-to-end delivery: the queued messages (10,000 by default), DKIM-signed, delivered
//     to a loopback SMTP sink (another process, like a remote MX) over real SMTP through the
//     real engine; delivered messages/s.
//  3. Peak memory (max RSS) of those two phases.
//  4. In processes of their own, started as `posthorn serve` is (scenario-process.ts): the
//     100,000-contact campaign queued; acceptance alone against a bare Koa + SQLite ceiling;
//     and the realistic case, acceptance and delivery at once with ~5 KB bodies.
// Phases 1 and 2 also report what they cost the store, per message (store-meter.ts).
// BENCH_STORE=postgres runs phases 1-3 on a PostgreSQL server the run starts (bench-postgres.ts);
// BENCH_NODES=n runs instead the cluster benchmark (cluster-bench.ts): n node processes on one
// PostgreSQL. Prints a table and writes bench/results.json. BENCH_SCENARIOS=realistic,acceptance picks.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { SqliteStore } from '../src/store/db.js';
import { benchPostgres, benchStore, startBenchApp, stopBenchPostgres } from './bench-app.js';
import { startSinkProcess } from './sink-process.js';
import { mxAddresses, RECIPIENT_DOMAINS, setRecipientDomains } from './bench-mx.js';
import { installPgCounters, installSqliteCounters } from './store-counters.js';
import { createPgMeter, createSqliteMeter, perUnit, storeRows } from './store-meter.js';
import { runClusterBench } from './cluster-bench.js';
import { SERVER_NODE_FLAGS } from '../src/cli/server-node-flags.js';
import { runConsoleBench } from './console-bench.js';

const run = promisify(execFile);
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);

async function main() {
  const store = benchStore();
  // Before any store opens: the counters patch the drivers' classes.
  const counters = store === 'postgres' ? installPgCounters() : installSqliteCounters();
  const mx = mxAddresses();
  const sink = await startSinkProcess({ extraHosts: mx.slice(1) });
  const workers = process.env.BENCH_SIGNING_WORKERS; // default: the product's own default
  // The engine starts paused: phase 1 measures acceptance alone.
  const bench = await startBenchApp('bench-sender.com', {
    rateLimit: { perSecond: 1_000_000 },
    outbound: { port: sink.port, allowLoopbackMx: true, ...(workers ? { signingWorkers: Number(workers) } : {}) },
  });
  const { app, zone, teamId } = bench;
  setRecipientDomains(zone, mx);
  const key = (await app.services.apiKeys.create(teamId, { name: 'bench' })).token;

  // Phase 1: acceptance over HTTP from another process.
  const body = JSON.stringify({
    from: 'Bench <hello@bench-sender.com>',
    to: 'user@rcpt0.bench.test',
    subject: 'Benchmark message',
    html: `<p>${'Hello from the benchmark. '.repeat(40)}</p>`,
    text: 'Hello from the benchmark.',
  });
  const client = fileURLToPath(new URL('./load-client.js', import.meta.url));
  const url = `http://127.0.0.1:${bench.httpPort}/v1/emails`;
  const meter =
    store === 'postgres'
      ? await createPgMeter(await benchPostgres(), bench.storeUrl, async () => counters.read())
      : createSqliteMeter(app.store as SqliteStore, counters);
  await run(process.execPath, [client, url, key, body, '500', '16', String(RECIPIENT_DOMAINS), String(MESSAGES)]); // warm-up
  const apiPhase = await meter.begin();
  // CPU of this process (the server; the load client is another process) per accepted send.
  const apiProfiler = process.env.BENCH_PROFILE_API ? await startProfile() : undefined;
  const apiCpuBefore = process.cpuUsage();
  const { stdout } = await run(process.execPath, [client, url, key, body, String(MESSAGES), String(CONCURRENCY), String(RECIPIENT_DOMAINS)], { maxBuffer: 1 << 20 });
  const apiCpu = process.cpuUsage(apiCpuBefore);
  const apiCost = await apiPhase.end();
  if (apiProfiler) await apiProfiler.stop(process.env.BENCH_PROFILE_API!);
  const api = JSON.parse(stdout) as { ok: number; failed: number; seconds: number; latenciesMs: { p50: number; p99: number; max: number } };

  const apiCpuMsPerRequest = round((apiCpu.user + apiCpu.system) / 1000 / Math.max(1, api.ok), 3);
  if (process.env.BENCH_API_ONLY) {
    process.stdout.write(`${JSON.stringify({ ...api, cpuMsPerRequest: apiCpuMsPerRequest })}\n`);
    await meter.close();
    await bench.close();
    await sink.close();
    await stopBenchPostgres();
    return;
  }
  // The load client spread the sends over RECIPIENT_DOMAINS destination domains, like real traffic.
  const db = app.store.db;
  const queued = await db.selectFrom('deliveries').select('id').where('state', '=', 'queued').execute();

  // Phase 2: end-to-end delivery of everything queued.
  const total = queued.length;
  const deliveryPhase = await meter.begin();
  const profiler = process.env.BENCH_PROFILE_DELIVERY ? await startProfile() : undefined;
  const started = performance.now();
  // CPU of all of Posthorn's threads (main, compose/sign workers, WAL checkpointer): on a
  // shared, noisy machine the CPU per message is a steadier figure than messages per second.
  const cpuBefore = process.cpuUsage();
  const eluBefore = performance.eventLoopUtilization();
  app.engine.start();
  await sink.onCount(total);
  await app.engine.whenIdle();
  const deliverSeconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const mainBusy = performance.eventLoopUtilization(eluBefore).utilization;
  if (profiler) await profiler.stop(process.env.BENCH_PROFILE_DELIVERY!);
  const deliveryCost = await deliveryPhase.end();
  // What the store still held in memory (PostgreSQL's dirty pages), written now: the data-file
  // writes of both phases, per message accepted and delivered.
  const flushed = await meter.flushDirty();
  await meter.close();
  const delivered = Number(
    (await db.selectFrom('deliveries').select((eb) => eb.fn.countAll<number>().as('n')).where('state', '=', 'delivered').executeTakeFirstOrThrow()).n,
  );
  // Phase 4: the web console over the data the phases above made (BENCH_SKIP_CONSOLE=1 leaves it out).
  const consoleBench = process.env.BENCH_SKIP_CONSOLE ? null : await runConsoleBench(app, `http://127.0.0.1:${bench.httpPort}`, teamId);
  await bench.close();
  const sinkCpu = await sink.close();
  const pgVersion = store === 'postgres' ? (await benchPostgres()).version : undefined;
  await stopBenchPostgres();

  const phasesPeakRssMb = Math.round(process.resourceUsage().maxRSS / 1024);
  const wanted = (process.env.BENCH_SCENARIOS ?? (process.env.BENCH_SKIP_CAMPAIGN ? 'acceptance,realistic,burst' : 'campaign,acceptance,realistic,burst')).split(',');
  const scenario = async <T>(name: string): Promise<T | undefined> => {
    if (!wanted.includes(name)) return undefined;
    const { stdout } = await run(process.execPath, [...SERVER_NODE_FLAGS, fileURLToPath(new URL('./scenario-process.js', import.meta.url)), name], { maxBuffer: 1 << 20 });
    return JSON.parse(stdout.trim().split('\n').pop()!) as T;
  };
  const campaign = (await scenario<CampaignResult>('campaign')) ?? { contacts: 0, seconds: 0, contactsQueuedPerSecond: 0, emailsQueued: 0, bulkAdd1000Ms: 0, peakRssMb: 0 };
  const acceptance = await scenario<AcceptanceResult>('acceptance');
  const realistic = await scenario<RealisticResult>('realistic');
  const burst = await scenario<BurstResult>('burst');

  const apiUnit = perUnit(apiCost, api.ok);
  const deliveryUnit = perUnit(deliveryCost, delivered);
  const results = {
    machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version },
    store: pgVersion ?? 'SQLite',
    api: {
      requests: MESSAGES,
      concurrency: CONCURRENCY,
      ok: api.ok,
      failed: api.failed,
      acceptedPerSecond: Math.round(api.ok / api.seconds),
      latencyMs: { p50: round(api.latenciesMs.p50), p99: round(api.latenciesMs.p99), max: round(api.latenciesMs.max) },
      serverCpuMsPerRequest: apiCpuMsPerRequest,
    },
    delivery: { messages: total, delivered, seconds: round(deliverSeconds), deliveredPerSecond: Math.round(delivered / deliverSeconds), dkimSigned: true,
      cpuMsPerMessage: round((cpu.user + cpu.system) / 1000 / Math.max(1, delivered), 2),
      coresUsed: round((cpu.user + cpu.system) / 1e6 / deliverSeconds, 2),
      mainThreadBusy: round(mainBusy, 2),
      // the sink process, whole life (its start-up is a few ms): not Posthorn's, on the same cores
      sinkCpuMsPerMessage: round(sinkCpu.cpuMs / Math.max(1, delivered), 2),
    },
    storeCost: {
      perAcceptedSend: apiUnit,
      perDeliveredMessage: deliveryUnit,
      // written when the store flushed what it still held after both phases (a PostgreSQL checkpoint; SQLite's last WAL pages)
      flushBytesPerMessage: Math.round(flushed.bytesWritten / Math.max(1, delivered)),
      api: apiCost,
      delivery: deliveryCost,
    },
    campaign,
    acceptance,
    realistic,
    burst,
    peakRssMb: phasesPeakRssMb,
    console: consoleBench,
  };
  writeFileSync(new URL('../../bench/results.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
  const rows: [string, string][] = [
    ['machine', `${results.machine.cpus} x ${results.machine.model ?? '?'}, Node ${results.machine.node}`],
    ['store', results.store],
    ['API sends accepted/s', `${results.api.acceptedPerSecond} (${api.ok} ok, ${api.failed} failed, ${CONCURRENCY} in flight)`],
    ['API latency p50 / p99', `${results.api.latencyMs.p50} ms / ${results.api.latencyMs.p99} ms`],
    ['API server CPU per accepted send', `${results.api.serverCpuMsPerRequest} ms`],
    ['delivered messages/s (DKIM, SMTP)', `${results.delivery.deliveredPerSecond} (${delivered} in ${results.delivery.seconds} s)`],
    ['delivery CPU per message (all threads)', `${results.delivery.cpuMsPerMessage} ms; ${results.delivery.coresUsed} cores busy, main thread ${Math.round(results.delivery.mainThreadBusy * 100)}%`],
    ['sink CPU per message (other process)', `${results.delivery.sinkCpuMsPerMessage} ms`],
    ...storeRows('per accepted send', apiCost, apiUnit),
    ...storeRows('per delivered message', deliveryCost, deliveryUnit),
    ['store flush after the run, per message', `${results.storeCost.flushBytesPerMessage} B`],
    ['peak RSS (phases 1 and 2)', `${results.peakRssMb} MB`],
    ["campaign contacts queued/s", `${campaign.contactsQueuedPerSecond} (${campaign.emailsQueued} of ${campaign.contacts} in ${campaign.seconds} s); peak RSS ${campaign.peakRssMb} MB`],
    ['bulk add of 1000 contacts', `${campaign.bulkAdd1000Ms} ms`],
    ...(acceptance
      ? ([
          ['acceptance alone (50 in flight, ~1 KB)', `${acceptance.posthorn.perSecond}/s, p50 ${acceptance.posthorn.p50} ms, p99 ${acceptance.posthorn.p99} ms; ${acceptance.posthorn.serverCpuMsPerRequest} ms CPU per send`],
          ['  ceiling: Koa + one SQLite insert', `${acceptance.ceiling.perSecond}/s, p99 ${acceptance.ceiling.p99} ms; Posthorn at ${Math.round(acceptance.ratioToCeiling * 100)}% of it`],
        ] as [string, string][])
      : []),
    ...(realistic
      ? ([
          [`realistic (${realistic.messages} x ${realistic.bodyBytes} B, ${realistic.concurrency} in flight)`, `accepted ${realistic.acceptedPerSecond}/s, delivered ${realistic.deliveredPerSecond}/s end to end (durability ${realistic.durability})`],
          ['  API latency while delivering', `p50 ${realistic.apiLatencyMs.p50} ms, p99 ${realistic.apiLatencyMs.p99} ms`],
          ['  CPU per message, peak RSS', `${realistic.cpuMsPerMessage} ms (all threads), ${realistic.peakRssMb} MB`],
        ] as [string, string][])
      : []),
    ...(burst
      ? ([[`burst (${burst.sends} x ${burst.megabytes} MB sends at once)`, `${Object.entries(burst.statuses).map(([code, n]) => `${n} x ${code}`).join(', ')} in ${burst.seconds} s; peak RSS ${burst.peakRssMb} MB, heap ${burst.peakHeapMb} MB`]] as [string, string][])
      : []),
    ['console render p50 (overview, emails, email)', consoleBench ? `${consoleBench.renderMsP50.overview} / ${consoleBench.renderMsP50.emails} / ${consoleBench.renderMsP50.email} ms (${consoleBench.pageKb.overview} / ${consoleBench.pageKb.emails} / ${consoleBench.pageKb.email} KB)` : 'skipped'],
    ['console in Chromium: sign-in cold, overview', consoleBench?.browser ? `interactive in ${consoleBench.browser.signInInteractiveMs} ms (${consoleBench.browser.signInTransferredKb} KB), overview in ${consoleBench.browser.overviewInteractiveMs} ms (loaded ${consoleBench.browser.overviewLoadedMs} ms)` : 'skipped'],
  ];
  const width = Math.max(...rows.map((r) => r[0].length));
  process.stdout.write(`\n${rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n')}\n\nwritten to bench/results.json\n`);
}

/** Optional CPU profile of one phase (BENCH_PROFILE_API / BENCH_PROFILE_DELIVERY=file.cpuprofile). */
async function startProfile() {
  const { Session } = await import('node:inspector/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return {
    async stop(file: string) {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
    },
  };
}

function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

if (process.env.BENCH_NODES) await runClusterBench(Number(process.env.BENCH_NODES));
else await main();

interface CampaignResult {
  contacts: number;
  seconds: number;
  contactsQueuedPerSecond: number;
  emailsQueued: number;
  bulkAdd1000Ms: number;
  peakRssMb: number;
}
interface AcceptanceResult {
  durability: string;
  ceiling: { perSecond: number; p50: number; p99: number };
  posthorn: { ok: number; failed: number; perSecond: number; p50: number; p99: number; serverCpuMsPerRequest: number };
  ratioToCeiling: number;
}
interface RealisticResult {
  durability: string;
  messages: number;
  bodyBytes: number;
  concurrency: number;
  acceptedPerSecond: number;
  deliveredPerSecond: number;
  apiLatencyMs: { p50: number; p99: number; max: number };
  cpuMsPerMessage: number;
  peakRssMb: number;
}
interface BurstResult {
  sends: number;
  megabytes: number;
  statuses: Record<string, number>;
  seconds: number;
  peakRssMb: number;
  peakHeapMb: number;
}
