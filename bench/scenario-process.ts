// Benchmark scenarios that need a process of their own, so that their peak memory and CPU are
// theirs alone: run as `node scenario-process.js <name>`, they print one JSON line.
//  acceptance: the acceptance ceiling (a bare Koa route with one SQLite insert, ceiling-server.ts)
//    and then Posthorn, under the same load from a separate client: 50 in flight, ~1 KB bodies,
//    sends scheduled a year ahead so that only acceptance is measured.
//  realistic: acceptance and delivery at once, as users load it: 10,000 sends of ~5 KB text to
//    20 destination domains, 50 in flight, delivered DKIM-signed over SMTP to a sink in another
//    process; accepted/s, delivered/s end to end, API latency while delivering, CPU per message
//    and peak RSS.
//  campaign: a 100,000-contact campaign queued (campaign-bench.ts), with its peak RSS.
//  burst: 40 sends of 20 MB at once, from a separate client (burst-client.ts): all answered, and
//    the peak RSS and heap while the bodies are received, wait their turn and are stored.
// run-bench.ts starts each with the Node options `posthorn serve` runs with (server-node-flags.ts).
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startBenchApp } from './bench-app.js';
import { startSinkProcess } from './sink-process.js';
import { runCampaignBench } from './campaign-bench.js';
import { wrkLoad, wrkPath, type LoadResult } from './wrk-client.js';

const run = promisify(execFile);
const client = fileURLToPath(new URL('./load-client.js', import.meta.url));
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_REALISTIC_CONCURRENCY ?? 50);
const BODY_BYTES = Number(process.env.BENCH_BODY_BYTES ?? 5000);
const DURABILITY = (process.env.BENCH_DURABILITY ?? 'full') as 'full' | 'normal';
/** BENCH_HTML=1: `realistic` sends ~BODY_BYTES of HTML with a link every ~250 bytes, opens and clicks tracked. */
const HTML = process.env.BENCH_HTML === '1';

/** A newsletter's HTML: paragraphs, each with a link, to ~BODY_BYTES. */
function newsletterHtml(): string {
  const paragraph = (i: number) => `<p style="margin:0 0 12px">Item ${i}: the quick brown fox jumps over the lazy dog. <a href="https://shop.example.com/items/${i}?utm_source=news&amp;utm_medium=email">See item ${i}</a></p>\n`;
  let html = '<!doctype html><html><head><meta charset="utf-8"><title>News</title></head><body>\n';
  for (let i = 0; html.length < BODY_BYTES - 20; i++) html += paragraph(i);
  return `${html}</body></html>`;
}

/**
 * Messages sent and delivered before `realistic` measures (BENCH_REALISTIC_WARMUP; 0 measures a
 * cold process). A fresh process spends its first seconds compiling its hot code on V8's
 * background threads: ~3 s of CPU here, a fifth of a cold 10,000-message run, which a
 * server that has been up for a minute no longer pays.
 */
const REALISTIC_WARM_UP = Number(process.env.BENCH_REALISTIC_WARMUP ?? 3000);

/** The Node load client (load-client.ts), in a process of its own. */
async function load(url: string, key: string, body: string, total: number, concurrency: number): Promise<LoadResult> {
  const { stdout } = await run(process.execPath, [client, url, key, body, String(total), String(concurrency)], { maxBuffer: 1 << 20 });
  return JSON.parse(stdout) as LoadResult;
}

/** Sends before each measured load, so that both servers are warm. */
const WARM_UP = 500;
/**
 * acceptance's load: the Node client, `total` sends; with BENCH_LOAD=wrk, wrk (wrk-client.ts)
 * for BENCH_WRK_SECONDS (5).
 */
const WRK = wrkPath();
const WRK_SECONDS = Number(process.env.BENCH_WRK_SECONDS ?? 5);
const acceptanceLoad = (url: string, key: string, body: string, total: number, concurrency: number): Promise<LoadResult> =>
  WRK ? wrkLoad(WRK, url, key, body, WRK_SECONDS, concurrency) : load(url, key, body, total, concurrency);
/** The warm-up: WARM_UP sends, or a second of wrk. */
const warmUp = (url: string, key: string, body: string): Promise<LoadResult> =>
  WRK ? wrkLoad(WRK, url, key, body, 1, 16) : load(url, key, body, WARM_UP, 16);

const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;
const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
/** CPU time another process has used so far, all threads (Linux /proc; clock ticks of 10 ms). */
function processCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function ceiling(total: number): Promise<{ perSecond: number; p50: number; p99: number; serverCpuMsPerRequest: number }> {
  const child = spawn(process.execPath, [fileURLToPath(new URL('./ceiling-server.js', import.meta.url))], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) => resolve((JSON.parse(d.toString()) as { port: number }).port));
    child.once('exit', () => reject(new Error('the ceiling server exited')));
  });
  const url = `http://127.0.0.1:${port}/v1/emails`;
  const body = JSON.stringify({ from: 'hello@bench-sender.com', to: 'user{i}@rcpt{d}.bench.test', subject: 'Ceiling', text: 'x'.repeat(800) });
  await warmUp(url, 'none', body);
  const cpuBefore = processCpuMs(child.pid!);
  const r = await acceptanceLoad(url, 'none', body, total, CONCURRENCY);
  const cpu = processCpuMs(child.pid!) - cpuBefore;
  child.kill('SIGTERM');
  return { perSecond: Math.round(r.ok / r.seconds), p50: round(r.latenciesMs.p50), p99: round(r.latenciesMs.p99), serverCpuMsPerRequest: round(cpu / Math.max(1, r.ok), 3) };
}

async function acceptance() {
  const total = MESSAGES;
  const ceil = await ceiling(total);
  const bench = await startBenchApp('bench-sender.com', { rateLimit: { perSecond: 1_000_000 }, store: { durability: DURABILITY } });
  const key = (await bench.app.services.apiKeys.create(bench.teamId, { name: 'bench' })).token;
  const url = `http://127.0.0.1:${bench.httpPort}/v1/emails`;
  const later = new Date(Date.now() + 365 * 86_400_000).toISOString();
  const body = JSON.stringify({ from: 'Bench <hello@bench-sender.com>', to: 'user{i}@rcpt{d}.bench.test', subject: 'Acceptance', text: 'x'.repeat(800), scheduledAt: later });
  await warmUp(url, key, body);
  const profiler = process.env.BENCH_PROFILE ? await startProfile() : undefined;
  const cpuBefore = process.cpuUsage();
  const r = await acceptanceLoad(url, key, body, total, CONCURRENCY);
  const cpu = cpuMs(process.cpuUsage(cpuBefore));
  if (profiler) await profiler.stop(process.env.BENCH_PROFILE!);
  await bench.close();
  const perSecond = Math.round(r.ok / r.seconds);
  return {
    scenario: 'acceptance',
    durability: DURABILITY,
    client: WRK ? 'wrk' : 'node',
    ceiling: ceil,
    posthorn: { ok: r.ok, failed: r.failed, perSecond, p50: round(r.latenciesMs.p50), p99: round(r.latenciesMs.p99), serverCpuMsPerRequest: round(cpu / Math.max(1, r.ok), 3) },
    ratioToCeiling: round(perSecond / ceil.perSecond, 2),
  };
}

async function realistic() {
  const sink = await startSinkProcess();
  const workers = process.env.BENCH_SIGNING_WORKERS;
  const bench = await startBenchApp('bench-sender.com', {
    rateLimit: { perSecond: 1_000_000 },
    outbound: { port: sink.port, allowLoopbackMx: true, ...(workers ? { signingWorkers: Number(workers) } : {}) },
    store: { durability: DURABILITY },
  });
  const { app, zone, teamId } = bench;
  zone.set('mx.bench.test', 'A', ['127.0.0.1']);
  for (let i = 0; i < 20; i++) zone.set(`rcpt${i}.bench.test`, 'MX', [{ exchange: 'mx.bench.test', priority: 10 }]);
  const key = (await app.services.apiKeys.create(teamId, { name: 'bench' })).token;
  const url = `http://127.0.0.1:${bench.httpPort}/v1/emails`;
  // ~BODY_BYTES of plain text in lines, as a newsletter or a receipt would have.
  const line = 'The quick brown fox jumps over the lazy dog, and the order ships tomorrow. ';
  const text = Array.from({ length: Math.ceil(BODY_BYTES / (line.length + 1)) }, () => line).join('\n').slice(0, BODY_BYTES);
  const body = JSON.stringify({ from: 'Bench <hello@bench-sender.com>', to: 'user{i}@rcpt{d}.bench.test', subject: 'Your order {i}', ...(HTML ? { html: newsletterHtml() } : { text }) });
  if (HTML) {
    // A newsletter as senders send them: opens and clicks tracked.
    const scope = { teamId, domainId: null };
    const [domain] = await app.services.domains.list(scope);
    await app.services.domains.update(scope, domain!.id, { clickTracking: true, openTracking: true });
  }
  app.engine.start();
  let warmUpDelivered = 0;
  if (REALISTIC_WARM_UP > 0) {
    warmUpDelivered = (await load(url, key, body, REALISTIC_WARM_UP, CONCURRENCY)).ok;
    await sink.onCount(warmUpDelivered);
  }
  const sinkCpuBefore = processCpuMs(sink.pid);
  // Where the memory is, sampled: the peak of each part (BENCH_MEMORY=1 prints them).
  const peaks = { rss: 0, heapUsed: 0, heapTotal: 0, external: 0, arrayBuffers: 0 };
  const sampler = setInterval(() => {
    if (!process.env.BENCH_MEMORY) return;
    const m = process.memoryUsage();
    for (const k of Object.keys(peaks) as (keyof typeof peaks)[]) peaks[k] = Math.max(peaks[k], Math.round(m[k] / 1048576));
  }, 100);
  const profiler = process.env.BENCH_PROFILE ? await startProfile() : undefined;
  // How long the event loop was blocked at a time: what an API request waits behind.
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  loopDelay.enable();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const api = await load(url, key, body, MESSAGES, CONCURRENCY);
  const acceptedAt = performance.now();
  if (process.env.BENCH_HEAPSNAPSHOT) (await import('node:v8')).writeHeapSnapshot(process.env.BENCH_HEAPSNAPSHOT);
  await sink.onCount(warmUpDelivered + api.ok);
  const deliveredAt = performance.now();
  const sinkCpuMs = processCpuMs(sink.pid) - sinkCpuBefore;
  const cpu = cpuMs(process.cpuUsage(cpuBefore));
  loopDelay.disable();
  clearInterval(sampler);
  if (profiler) await profiler.stop(process.env.BENCH_PROFILE!);
  const peakRssMb = Math.round(process.resourceUsage().maxRSS / 1024);
  await bench.close();
  await sink.close();
  return {
    scenario: 'realistic',
    durability: DURABILITY,
    warmUp: REALISTIC_WARM_UP,
    messages: MESSAGES,
    bodyBytes: BODY_BYTES,
    concurrency: CONCURRENCY,
    acceptedPerSecond: Math.round(api.ok / ((acceptedAt - started) / 1000)),
    failed: api.failed,
    deliveredPerSecond: Math.round(api.ok / ((deliveredAt - started) / 1000)),
    apiLatencyMs: { p50: round(api.latenciesMs.p50), p99: round(api.latenciesMs.p99), max: round(api.latenciesMs.max) },
    eventLoopDelayMs: { p99: round(loopDelay.percentile(99) / 1e6), max: round(loopDelay.max / 1e6) },
    cpuMsPerMessage: round(cpu / Math.max(1, api.ok), 2),
    sinkCpuMsPerMessage: round(sinkCpuMs / Math.max(1, api.ok), 2),
    peakRssMb,
    ...(process.env.BENCH_MEMORY ? { memoryPeaksMb: peaks } : {}),
  };
}

/** A CPU profile of the main thread (BENCH_PROFILE=file.cpuprofile). */
async function startProfile() {
  const { Session } = await import('node:inspector/promises');
  const { writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  // BENCH_PROFILE_ALLOC=1: where the main thread allocates (sampling heap profiler) instead of where it spends CPU.
  const alloc = !!process.env.BENCH_PROFILE_ALLOC;
  if (alloc) await session.post('HeapProfiler.startSampling', { samplingInterval: 32768, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } as never);
  else {
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
  }
  return {
    async stop(file: string) {
      const { profile } = alloc ? await session.post('HeapProfiler.stopSampling') : await session.post('Profiler.stop');
      writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
    },
  };
}

/**
 * Large bodies all at once (BENCH_BURST, count x megabytes: 40x20): every send answered, how long
 * it took, and the peak memory while bodies are received, wait for their turn and are stored.
 */
async function burst() {
  const [count, megabytes] = (process.env.BENCH_BURST ?? '40x20').split('x').map(Number) as [number, number];
  const bench = await startBenchApp('bench-sender.com', { rateLimit: { perSecond: 1_000_000 }, store: { durability: DURABILITY } });
  const key = (await bench.app.services.apiKeys.create(bench.teamId, { name: 'bench' })).token;
  let peakHeap = 0;
  const sampler = setInterval(() => (peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed)), 20);
  const rssBefore = Math.round(process.resourceUsage().maxRSS / 1024);
  const started = performance.now();
  const { stdout } = await run(process.execPath, [fileURLToPath(new URL('./burst-client.js', import.meta.url)), String(bench.httpPort), key, String(count), String(megabytes)], { maxBuffer: 1 << 20 });
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  const { statuses } = JSON.parse(stdout) as { statuses: Record<string, number> };
  await bench.close();
  return { scenario: 'burst', sends: count, megabytes, statuses, seconds: round(seconds, 2), rssBeforeMb: rssBefore, peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024), peakHeapMb: Math.round(peakHeap / 1048576) };
}

/** The 100,000-contact campaign queued, in a process of its own: its speed and the memory it takes. */
async function campaign() {
  const result = await runCampaignBench();
  return { scenario: 'campaign', ...result, peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024) };
}

const scenarios: Record<string, () => Promise<unknown>> = { acceptance, realistic, campaign, burst };
const name = process.argv[2] ?? '';
const scenario = scenarios[name];
if (!scenario) throw new Error(`unknown scenario ${name}: one of ${Object.keys(scenarios).join(', ')}`);
process.stdout.write(`${JSON.stringify(await scenario())}\n`);
