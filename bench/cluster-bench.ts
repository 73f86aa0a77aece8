// BENCH_NODES=n npm run bench: n Posthorn nodes, each in a process of its own (bench-node.ts),
// sharing one PostgreSQL (bench-postgres.ts), the same two phases as run-bench.ts:
//  1. API acceptance: BENCH_MESSAGES sends from one load process that takes the nodes in turn
//     (BENCH_CONCURRENCY in flight in all), the engines paused;
//  2. delivery: every node's engine started at once; the nodes claim from the one queue, DKIM-sign
//     and deliver to the loopback sink, until everything is delivered.
// Reported per accepted send and per delivered message: the nodes' CPU (all their threads),
// PostgreSQL's CPU, and what the store did (store-meter.ts); plus what each node delivered and
// whether the sink got anything twice. On a 2-core machine n nodes share the same cores, so the
// point is the cost per message as nodes are added, not the rate. Interleave runs of n = 1 and
// n = 2 to compare them.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { startDnsZone } from '../test/helpers/dns-zone.js';
import { benchDatabase, benchPostgres, stopBenchPostgres } from './bench-app.js';
import { startBenchNode, type BenchNode } from './bench-node.js';
import { startSinkProcess } from './sink-process.js';
import { mxAddresses, RECIPIENT_DOMAINS, setRecipientDomains } from './bench-mx.js';
import { METER_APPLICATION, type ClientCounts } from './store-counters.js';
import { createPgMeter, perUnit, storeRows } from './store-meter.js';

const run = promisify(execFile);
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
/** Sends before the measured phase (JIT, pools, caches), taken by the nodes in turn; delivered in phase 2. */
const WARM_UP = 500;

export async function runClusterBench(nodeCount: number): Promise<void> {
  if (!Number.isInteger(nodeCount) || nodeCount < 1) throw new Error('BENCH_NODES must be a whole number of nodes, 1 or more');
  const server = await benchPostgres();
  const storeUrl = await benchDatabase();
  const mx = mxAddresses();
  const sink = await startSinkProcess({ extraHosts: mx.slice(1) });
  const zone = await startDnsZone();
  setRecipientDomains(zone, mx);
  const workers = process.env.BENCH_SIGNING_WORKERS;
  const nodeOptions = (i: number) => ({ storeUrl, nodeName: `node-${i}`, dnsServer: zone.server, sinkPort: sink.port, ...(workers ? { signingWorkers: Number(workers) } : {}) });
  // The first node migrates the database; the others join it.
  const nodes: BenchNode[] = [await startBenchNode(nodeOptions(1))];
  nodes.push(...(await Promise.all(Array.from({ length: nodeCount - 1 }, (_, i) => startBenchNode(nodeOptions(i + 2))))));
  const domain = await nodes[0]!.createDomain('bench-sender.com');
  for (const r of domain.records) zone.set(r.name, r.type as 'TXT', [r.type === 'MX' ? { exchange: r.value, priority: 10 } : r.value]);
  const key = await nodes[0]!.verifyDomain(domain.teamId, domain.domainId);

  const stats = () => Promise.all(nodes.map((n) => n.stats()));
  const cpuOf = (s: { cpuMs: number }[]) => s.map((x) => x.cpuMs);
  const counts = async (): Promise<ClientCounts> =>
    (await stats()).reduce((a, s) => ({ roundTrips: a.roundTrips + s.counts.roundTrips, writeTransactions: a.writeTransactions + s.counts.writeTransactions }), { roundTrips: 0, writeTransactions: 0 });
  const meter = await createPgMeter(server, storeUrl, counts);
  const admin = new pg.Client({ connectionString: storeUrl, application_name: METER_APPLICATION });
  await admin.connect();

  // Phase 1: acceptance, the sends spread over the nodes.
  const body = JSON.stringify({
    from: 'Bench <hello@bench-sender.com>',
    to: 'user@rcpt0.bench.test',
    subject: 'Benchmark message',
    html: `<p>${'Hello from the benchmark. '.repeat(40)}</p>`,
    text: 'Hello from the benchmark.',
  });
  const client = fileURLToPath(new URL('./load-client.js', import.meta.url));
  const urls = nodes.map((n) => `http://127.0.0.1:${n.httpPort}/v1/emails`).join(',');
  await run(process.execPath, [client, urls, key, body, String(WARM_UP), '16', String(RECIPIENT_DOMAINS), String(MESSAGES)]);
  const apiPhase = await meter.begin();
  const apiCpu0 = cpuOf(await stats());
  const { stdout } = await run(process.execPath, [client, urls, key, body, String(MESSAGES), String(CONCURRENCY), String(RECIPIENT_DOMAINS)], { maxBuffer: 1 << 20 });
  const apiCpu = cpuOf(await stats()).map((c, i) => c - apiCpu0[i]!);
  const apiCost = await apiPhase.end();
  const api = JSON.parse(stdout) as { ok: number; failed: number; seconds: number; latenciesMs: { p50: number; p99: number; max: number } };

  // Phase 2: every node's engine on the one queue.
  const total = Number((await admin.query<{ n: string }>("select count(*) as n from deliveries where state = 'queued'")).rows[0]!.n);
  const deliveryPhase = await meter.begin();
  const cpu0 = cpuOf(await stats());
  const started = performance.now();
  await Promise.all(nodes.map((n) => n.startEngine()));
  await sink.onCount(total);
  await Promise.all(nodes.map((n) => n.whenIdle()));
  const seconds = (performance.now() - started) / 1000;
  const cpu = cpuOf(await stats()).map((c, i) => c - cpu0[i]!);
  const deliveryCost = await deliveryPhase.end();
  const flushed = await meter.flushDirty();
  await meter.close();
  const delivered = Number((await admin.query<{ n: string }>("select count(*) as n from deliveries where state = 'delivered'")).rows[0]!.n);
  const stuck = Number((await admin.query<{ n: string }>('select count(*) as n from deliveries where lease_owner is not null')).rows[0]!.n);
  await admin.end();
  const byNode = await Promise.all(nodes.map((n) => n.delivered()));
  await Promise.all(nodes.map((n) => n.close()));
  const sinkClosed = await sink.close();
  await zone.close();
  const version = server.version;
  await stopBenchPostgres();

  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const r = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;
  const apiUnit = perUnit(apiCost, api.ok);
  const deliveryUnit = perUnit(deliveryCost, delivered);
  const results = {
    scenario: `cluster of ${nodeCount} node${nodeCount > 1 ? 's' : ''}, each a process of its own, on one PostgreSQL`,
    machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version },
    store: version,
    nodes: nodeCount,
    api: {
      requests: MESSAGES,
      concurrency: CONCURRENCY,
      ok: api.ok,
      failed: api.failed,
      acceptedPerSecond: Math.round(api.ok / api.seconds),
      latencyMs: { p50: r(api.latenciesMs.p50, 1), p99: r(api.latenciesMs.p99, 1) },
      nodesCpuMsPerRequest: r(sum(apiCpu) / Math.max(1, api.ok), 3),
      cpuMsByNode: apiCpu.map((c) => Math.round(c)),
    },
    delivery: {
      messages: total,
      delivered,
      deliveredByNode: byNode,
      sinkReceived: sinkClosed.received,
      duplicates: Math.max(0, sinkClosed.received - total),
      leasesLeft: stuck,
      seconds: r(seconds, 1),
      deliveredPerSecond: Math.round(delivered / seconds),
      nodesCpuMsPerMessage: r(sum(cpu) / Math.max(1, delivered)),
      cpuMsByNode: cpu.map((c) => Math.round(c)),
      sinkCpuMsPerMessage: r(sinkClosed.cpuMs / Math.max(1, delivered)),
    },
    storeCost: {
      perAcceptedSend: apiUnit,
      perDeliveredMessage: deliveryUnit,
      flushBytesPerMessage: Math.round(flushed.bytesWritten / Math.max(1, delivered)),
      api: apiCost,
      delivery: deliveryCost,
    },
  };
  writeFileSync(new URL('../../bench/results.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
  const rows: [string, string][] = [
    ['machine', `${results.machine.cpus} x ${results.machine.model ?? '?'}, Node ${results.machine.node}`],
    ['scenario', results.scenario],
    ['store', version],
    ['API sends accepted/s', `${results.api.acceptedPerSecond} (${api.ok} ok, ${api.failed} failed, ${CONCURRENCY} in flight over ${nodeCount} node(s))`],
    ['API latency p50 / p99', `${results.api.latencyMs.p50} ms / ${results.api.latencyMs.p99} ms`],
    ['nodes CPU per accepted send', `${results.api.nodesCpuMsPerRequest} ms (by node: ${apiCpu.map((c) => `${Math.round(c)} ms`).join(', ')})`],
    ['delivered messages/s (DKIM, SMTP)', `${results.delivery.deliveredPerSecond} (${delivered} of ${total} in ${results.delivery.seconds} s; by node ${byNode.join(' + ')})`],
    ['nodes CPU per delivered message', `${results.delivery.nodesCpuMsPerMessage} ms (by node: ${cpu.map((c) => `${Math.round(c)} ms`).join(', ')})`],
    ['sink: received, CPU per message', `${sinkClosed.received} messages (${results.delivery.duplicates} more than queued), ${results.delivery.sinkCpuMsPerMessage} ms`],
    ['leases left after the run', String(stuck)],
    ...storeRows('per accepted send', apiCost, apiUnit),
    ...storeRows('per delivered message', deliveryCost, deliveryUnit),
    ['store flush after the run, per message', `${results.storeCost.flushBytesPerMessage} B`],
  ];
  const width = Math.max(...rows.map((x) => x[0].length));
  process.stdout.write(`\n${rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n')}\n\nwritten to bench/results.json\n`);
}
