// One Posthorn node of the cluster benchmark (cluster-bench.ts) in a process of its own, as a
// `posthorn serve` on another machine would be: the same createApp, on the shared PostgreSQL,
// with its listeners on loopback port 0 and the delivery engine paused until the parent starts
// it. It counts its store round trips (store-counters.ts) and reports them with its CPU time.
//
// The parent talks to it over the fork() IPC channel: requests {id, cmd, ...} and replies
// {id, ok, value | error}; the first message from the child is {ready, httpPort}.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClientCounts } from './store-counters.js';

export interface NodeOptions {
  storeUrl: string;
  nodeName: string;
  dnsServer: string;
  sinkPort: number;
  signingWorkers?: number;
}

export interface NodeStats {
  cpuMs: number;
  counts: ClientCounts;
}

type Request =
  | { cmd: 'createDomain'; name: string }
  | { cmd: 'verifyDomain'; teamId: number; domainId: number }
  | { cmd: 'startEngine' }
  | { cmd: 'whenIdle' }
  | { cmd: 'stats' }
  | { cmd: 'delivered' }
  | { cmd: 'close' };

export interface BenchNode {
  name: string;
  httpPort: number;
  createDomain(name: string): Promise<{ teamId: number; domainId: number; records: { name: string; type: string; value: string }[] }>;
  /** Verifies the domain and returns a FULL API key of its team. */
  verifyDomain(teamId: number, domainId: number): Promise<string>;
  startEngine(): Promise<void>;
  whenIdle(): Promise<void>;
  /** CPU time so far (all threads) and store round trips; reading them runs no query. */
  stats(): Promise<NodeStats>;
  /** Recipients this node delivered (its posthorn_messages_delivered_total; reading it runs queries). */
  delivered(): Promise<number>;
  close(): Promise<void>;
}

export function startBenchNode(opts: NodeOptions): Promise<BenchNode> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['--node'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  let nextId = 0;
  let closing = false;
  const call = <T>(req: Request): Promise<T> =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      waiting.set(id, { resolve, reject });
      child.send({ id, ...req });
    });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => {
      if (closing) return;
      process.stderr.write(`bench node ${opts.nodeName} exited unexpectedly (code ${code})\n`);
      reject(new Error('node exited'));
      process.exit(1);
    });
    child.on('message', (m: { ready?: boolean; httpPort?: number; id?: number; ok?: boolean; value?: unknown; error?: string }) => {
      if (m.ready) {
        resolve({
          name: opts.nodeName,
          httpPort: m.httpPort!,
          createDomain: (name) => call({ cmd: 'createDomain', name }),
          verifyDomain: (teamId, domainId) => call({ cmd: 'verifyDomain', teamId, domainId }),
          startEngine: () => call({ cmd: 'startEngine' }),
          whenIdle: () => call({ cmd: 'whenIdle' }),
          stats: () => call({ cmd: 'stats' }),
          delivered: () => call({ cmd: 'delivered' }),
          async close() {
            closing = true;
            const exited = new Promise((done) => child.once('exit', done));
            await call({ cmd: 'close' });
            await exited;
          },
        });
        return;
      }
      const w = waiting.get(m.id!);
      waiting.delete(m.id!);
      if (m.ok) w?.resolve(m.value);
      else w?.reject(new Error(m.error));
    });
    child.send(opts);
  });
}

async function serve(opts: NodeOptions): Promise<void> {
  // Before the store opens: the counters patch pg's Client.
  const { installPgCounters } = await import('./store-counters.js');
  const counters = installPgCounters();
  const { createApp } = await import('../src/app.js');
  const { loadConfig } = await import('../src/config/load.js');
  const { createDnsClient } = await import('../src/lib/dns/dns-client.js');
  const dataDir = mkdtempSync(join(tmpdir(), 'posthorn-bench-node-'));
  const config = loadConfig({
    env: {},
    overrides: {
      dataDir,
      store: { url: opts.storeUrl },
      cluster: { nodeName: opts.nodeName },
      hostname: 'mx.posthorn.bench',
      log: { level: 'warn' },
      http: { host: '127.0.0.1', port: 0 },
      inbound: { host: '127.0.0.1', port: 0 },
      submission: { host: '127.0.0.1', port: 0 },
      dns: { servers: [opts.dnsServer] },
      rateLimit: { perSecond: 1_000_000 },
      outbound: { port: opts.sinkPort, allowLoopbackMx: true, ...(opts.signingWorkers !== undefined ? { signingWorkers: opts.signingWorkers } : {}) },
    },
  });
  const app = await createApp({ config, resolver: createDnsClient({ servers: [opts.dnsServer], timeoutMs: 1000, tries: 1 }) });
  const listeners = await app.start();
  await app.engine.stop();
  const handle = async (req: Request): Promise<unknown> => {
    switch (req.cmd) {
      case 'createDomain': {
        const teamId = (await app.services.teams.list())[0]?.id ?? (await app.services.teams.create('Bench'));
        const domain = await app.services.domains.create({ teamId, domainId: null }, { name: req.name, region: 'local' });
        return { teamId, domainId: domain.id, records: domain.dnsRecords.map((r) => ({ name: r.name, type: r.type, value: r.value })) };
      }
      case 'verifyDomain':
        await app.services.domains.verify({ teamId: req.teamId, domainId: null }, req.domainId);
        return (await app.services.apiKeys.create(req.teamId, { name: 'bench', permission: 'FULL' })).token;
      case 'startEngine':
        app.engine.start();
        return undefined;
      case 'whenIdle':
        await app.engine.whenIdle();
        return undefined;
      case 'stats': {
        const cpu = process.cpuUsage();
        return { cpuMs: (cpu.user + cpu.system) / 1000, counts: counters.read() } satisfies NodeStats;
      }
      case 'delivered': {
        const text = await app.metrics.render();
        return [...text.matchAll(/^posthorn_messages_delivered_total\{[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
      }
      case 'close':
        await app.stop();
        rmSync(dataDir, { recursive: true, force: true });
        return undefined;
    }
  };
  process.on('message', (m: Request & { id: number }) => {
    handle(m).then(
      (value) => {
        process.send!({ id: m.id, ok: true, value });
        if (m.cmd === 'close') process.disconnect();
      },
      (err: Error) => process.send!({ id: m.id, ok: false, error: err.stack ?? err.message }),
    );
  });
  process.send!({ ready: true, httpPort: listeners.http!.port });
}

if (process.argv.includes('--node') && process.send) {
  process.once('message', (opts: NodeOptions) => void serve(opts));
}
