// Load generator for the API benchmark, run as a separate process so it does not share the
// server's event loop. Sends `total` POSTs with `concurrency` in flight over keep-alive
// connections and prints {ok, failed, seconds, latenciesMs: {p50, p99, max}, clientCpuMsPerRequest} as JSON.
// Request n (counted from `first`, which keeps the addresses of several clients apart) spreads
// over destinations: a body containing {i} gets n there and {d} n modulo `domains` (20 when not
// given); a body without them, with `domains` > 0, goes to user<n>@rcpt<n % domains>.bench.test.
// Several URLs, comma-separated (the nodes of a cluster), take the sends in turn.
import http from 'node:http';

const [url, key, bodyJson, totalArg, concurrencyArg, domainsArg, firstArg] = process.argv.slice(2);
const total = Number(totalArg);
const concurrency = Number(concurrencyArg);
const domains = Number(domainsArg ?? 0);
const first = Number(firstArg ?? 0);
const targets = url!.split(',').map((u) => new URL(u));
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
const template = bodyJson!;
const templated = template.includes('{i}') || template.includes('{d}');
const parsed = !templated && domains > 0 ? (JSON.parse(template) as Record<string, unknown>) : undefined;
const fixed = templated || parsed ? undefined : Buffer.from(template);

function bodyOf(i: number): Buffer {
  const n = first + i;
  if (fixed) return fixed;
  if (parsed) return Buffer.from(JSON.stringify({ ...parsed, to: `user${n}@rcpt${n % domains}.bench.test` }));
  return Buffer.from(template.replaceAll('{i}', String(n)).replaceAll('{d}', String(n % (domains || 20))));
}

function post(i: number): Promise<number> {
  const target = targets[i % targets.length]!;
  const body = bodyOf(i);
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        agent,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

const latencies: number[] = [];
let ok = 0;
let failed = 0;
let next = 0;
const started = performance.now();
const cpuBefore = process.cpuUsage();
async function worker(): Promise<void> {
  while (next < total) {
    const i = next++;
    const t0 = performance.now();
    const status = await post(i);
    latencies.push(performance.now() - t0);
    if (status === 200) ok++;
    else failed++;
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
// the load generator shares the machine with the server: its own CPU per request is part of the picture
const clientCpuMsPerRequest = (cpu.user + cpu.system) / 1000 / Math.max(1, total);
latencies.sort((a, b) => a - b);
const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!;
process.stdout.write(JSON.stringify({ ok, failed, seconds, latenciesMs: { p50: pct(50), p99: pct(99), max: latencies[latencies.length - 1] }, clientCpuMsPerRequest }));
agent.destroy();
