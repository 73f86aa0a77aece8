// A Posthorn process for benchmarks: its own data dir and DNS zone, listeners on loopback port
// 0, a team with a verified sending domain, and the delivery engine paused (each benchmark
// starts it when it wants delivery measured).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp, type App } from '../src/app.js';
import type { Config } from '../src/config/defaults.js';
import { loadConfig, type DeepPartial } from '../src/config/load.js';
import { createDnsClient } from '../src/lib/dns/dns-client.js';
import { startDnsZone, type DnsZone } from '../test/helpers/dns-zone.js';

export interface BenchApp {
  app: App;
  zone: DnsZone;
  teamId: number;
  httpPort: number;
  close(): Promise<void>;
}

export async function startBenchApp(domainName: string, overrides: DeepPartial<Config> = {}): Promise<BenchApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'posthorn-bench-'));
  const zone = await startDnsZone();
  const config = loadConfig({
    env: {},
    overrides: {
      ...overrides,
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
    async close() {
      await app.stop();
      await zone.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
