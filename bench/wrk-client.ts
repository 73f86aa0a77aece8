// The acceptance load from wrk (C, one thread, keep-alive connections) instead of the Node client,
// as a cross-check of the client's own part in the figures (BENCH_LOAD=wrk; Debian: apt-get
// install wrk). wrk runs for a time, not a count (its main thread sleeps the whole duration
// whatever the script does), so the load is `seconds` of POSTs, the body's {i} and {d} filled
// per request as load-client.ts does; the result is printed in load-client.ts's shape.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface LoadResult {
  ok: number;
  failed: number;
  seconds: number;
  latenciesMs: { p50: number; p99: number; max: number };
}

/** With BENCH_LOAD=wrk, the wrk binary (BENCH_WRK, or Debian's); otherwise null: the Node client. */
export function wrkPath(): string | null {
  if (process.env.BENCH_LOAD !== 'wrk') return null;
  const path = process.env.BENCH_WRK ?? '/usr/bin/wrk';
  if (!existsSync(path)) throw new Error(`BENCH_LOAD=wrk but ${path} does not exist (apt-get install wrk, or set BENCH_WRK)`);
  return path;
}

function script(key: string, body: string, domains: number): string {
  return `
local template = [==[${body}]==]
local n = 0
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer ${key}"
wrk.headers["Content-Type"] = "application/json"
function request()
  local i = n
  n = n + 1
  local b = template:gsub("{i}", tostring(i)):gsub("{d}", tostring(i % ${domains}))
  return wrk.format(nil, nil, nil, b)
end
function done(summary, latency, requests)
  local e = summary.errors
  local bad = e.status + e.connect + e.read + e.write + e.timeout
  io.write(string.format('{"requests":%d,"bad":%d,"micros":%d,"p50":%d,"p99":%d,"max":%d}\\n',
    summary.requests, bad, summary.duration, latency:percentile(50), latency:percentile(99), latency.max))
end
`;
}

export async function wrkLoad(wrk: string, url: string, key: string, body: string, seconds: number, concurrency: number, domains = 20): Promise<LoadResult> {
  if (body.includes(']==]')) throw new Error('the body can not be embedded in the wrk script');
  const dir = mkdtempSync(join(tmpdir(), 'posthorn-wrk-'));
  const file = join(dir, 'load.lua');
  writeFileSync(file, script(key, body, domains));
  try {
    const { stdout } = await run(wrk, ['-t1', `-c${concurrency}`, `-d${seconds}s`, '--timeout', '30s', '-s', file, url], { maxBuffer: 1 << 20 });
    const line = stdout.split('\n').find((l) => l.startsWith('{"requests"'));
    if (!line) throw new Error(`wrk printed no result:\n${stdout}`);
    const r = JSON.parse(line) as { requests: number; bad: number; micros: number; p50: number; p99: number; max: number };
    return {
      ok: r.requests - r.bad,
      failed: r.bad,
      seconds: r.micros / 1e6,
      latenciesMs: { p50: r.p50 / 1000, p99: r.p99 / 1000, max: r.max / 1000 },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
