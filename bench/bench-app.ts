// A Posthorn process for benchmarks: its own data dir and DNS zone, listeners on loopback port
// 0, a team with a verified sending domain, and the delivery engine paused (each benchmark
// starts it when it wants delivery measured). BENCH_STORE=postgres puts its store in a
// database of its own on the benchmark's PostgreSQL (bench-postgres.ts, started once per run).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp, type App } from '../src/app.js';
import type { Config } from '../src/config/defaults.js';
import { loadConfig, type DeepPartial } from '../src/config/load.js';
import { createDnsClient } from '../src/lib/dns/dns-client.js';
import { startDnsZone, type DnsZone } from '../test/helpers/dns-zone.js';
import { startBenchPostgres, type BenchPostgres } from './bench-postgres.js';

export interface BenchApp {
  app: App;
  zone: DnsZone;
  teamId: number;
  httpPort: number;
  /** PostgreSQL: the database's URL (empty on SQLite). */
  storeUrl: string;
  close(): Promise<void>;
}

export function benchStore(): 'sqlite' | 'postgres' {
  const kind = process.env.BENCH_STORE ?? 'sqlite';
  if (kind !== 'sqlite' && kind !== 'postgres') throw new Error(`BENCH_STORE must be sqlite or postgres, not ${kind}`);
  return kind;
}

let server: Promise<BenchPostgres> | undefined;
let databases = 0;

/** The run's PostgreSQL server, started the first time it is asked for. */
export function benchPostgres(): Promise<BenchPostgres> {
  return (server ??= startBenchPostgres());
}

/** Stops the run's PostgreSQL server, if one was started. */
export async function stopBenchPostgres(): Promise<void> {
  if (server) await (await server).stop();
  server = undefined;
}

/** A new database on the run's PostgreSQL server. */
export async function benchDatabase(): Promise<string> {
  return (await benchPostgres()).createDatabase(`posthorn_bench_${++databases}`);
}

export async function startBenchApp(domainName: string, overrides: DeepPartial<Config> = {}): Promise<BenchApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'posthorn-bench-'));
  const zone = await startDnsZone();
  const storeUrl = benchStore() === 'postgres' ? await benchDatabase() : '';
  const config = loadConfig({
    env: {},
    overrides: {
      ...overrides,
      store: { ...overrides.store, url: storeUrl },
      dataDir,
      hostname: 'mx.posthorn.bench',
      log: { level: 'warn' },
      http: { host: '127.0.0.1', port: 0 },
      inbound: { host: '127.0.0.1', port: 0 },
      submission: { host: '127.0.0.1', port: 0 },
      dns: { servers: [zone.server] },
    },
  });
  const app = await createApp({ config, resolver: createDnsClient({ servers: [zone.server], timeoutMs: 1000, tries: 1 }) });
  const listeners = await app.start();
  await app.engine.stop();
  const teamId = (await app.services.teams.list())[0]?.id ?? (await app.services.teams.create('Bench'));
  const scope = { teamId, domainId: null };
  const domain = await app.services.domains.create(scope, { name: domainName, region: 'local' });
  for (const r of domain.dnsRecords) zone.set(r.name, r.type as 'TXT', [r.type === 'MX' ? { exchange: r.value, priority: 10 } : r.value]);
  await app.services.domains.verify(scope, domain.id);
  return {
    app,
    zone,
    teamId,
    httpPort: listeners.http!.port,
    storeUrl,
    async close() {
      await app.stop();
      await zone.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
