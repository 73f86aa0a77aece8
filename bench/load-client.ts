// Load generator for the API benchmark, run as a separate process so it does not share the
// server's event loop. Sends `total` POSTs with `concurrency` in flight over keep-alive
// connections and prints {ok, failed, seconds, latenciesMs: {p50, p99, max}, clientCpuMsPerRequest} as JSON.
// A body containing {i} gets the request's number there and {d} that number modulo 20 (a
// different recipient per request, spread over 20 destination domains).
import http from 'node:http';

const [url, key, bodyJson, totalArg, concurrencyArg] = process.argv.slice(2);
const total = Number(totalArg);
const concurrency = Number(concurrencyArg);
const target = new URL(url!);
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
const template = bodyJson!;
const fixed = template.includes('{i}') || template.includes('{d}') ? undefined : Buffer.from(template);

function post(i: number): Promise<number> {
  const body = fixed ?? Buffer.from(template.replaceAll('{i}', String(i)).replaceAll('{d}', String(i % 20)));
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
