import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DeepPartial } from '../../src/config/load.js';
import type { Config } from '../../src/config/defaults.js';
import type { Clock } from '../../src/lib/clock.js';
import type { Logger } from '../../src/lib/logger.js';
import { createDnsClient } from '../../src/lib/dns/dns-client.js';
import { toNodeStyleResolver } from '../../src/lib/dns/node-style-resolver.js';
import { startDnsZone, type DnsZone } from './dns-zone.js';
import { startSmtpSink, type SmtpSink, type SinkBehaviour } from './smtp-sink.js';
import { testCert } from './test-keys.js';
import { dropDataDirDatabase, startTestApp, TEST_DNS_TIMEOUT_MS, type TestApp, type TestAppOptions } from './test-app.js';
import { addVerifiedDomain } from './domain-fixtures.js';

export interface MailWorld {
  t0: TestApp;
  sink: SmtpSink;
  zone: DnsZone;
  /** The verified sending domain (API shape). */
  domain: any;
  /** Makes `name` a recipient domain whose MX is the sink. */
  addRecipientDomain(name: string): void;
  /**
   * Another MX on 127.0.0.N (N = 2, 3, ...) with the same port (the outbound port is global)
   * and the same trusted certificate, serving `domain` (its MX host is mxN.sink.test).
   */
  startSecondSink(domain: string, behaviour?: Partial<SinkBehaviour> & { size?: number }): Promise<SmtpSink>;
  /** Waits until the engine has nothing in flight and nothing due, and the after-commit handlers of what it recorded have run. */
  settle(): Promise<void>;
  /** Verifies the DKIM signature of a raw message against the test zone; returns mailauth's status. */
  dkimStatus(raw: Buffer): Promise<string>;
  restart(overrides?: DeepPartial<Config>): Promise<void>;
  close(): Promise<void>;
}

export const SINK_HOST = 'mx.sink.test';
const EXTRA_SINKS = 4;

function sharedCert() {
  const extra = Array.from({ length: EXTRA_SINKS }, (_, i) => i + 2);
  return testCert({
    hostnames: [SINK_HOST, ...extra.map((n) => `mx${n}.sink.test`)],
    ips: ['127.0.0.1', ...extra.map((n) => `127.0.0.${n}`)],
  });
}

/**
 * A sending world: a DNS zone, an SMTP sink as the MX of example.net / example.org, and a
 * Posthorn app with a verified sending domain, delivering to the sink's port.
 */
export async function startMailWorld(
  opts: { clock?: Clock; sink?: Partial<SinkBehaviour>; overrides?: DeepPartial<Config>; domain?: string; logger?: Logger; resolver?: TestAppOptions['resolver'] } = {},
): Promise<MailWorld> {
  const zone = await startDnsZone();
  // One certificate for both sink host names, so a single CA file trusts either MX.
  const cert = await sharedCert();
  const sink = await startSmtpSink({ ...(opts.sink ?? {}), hostname: SINK_HOST, cert });
  const extraSinks: SmtpSink[] = [];
  const caDir = mkdtempSync(join(tmpdir(), 'posthorn-ca-'));
  const caFile = join(caDir, 'sink-ca.pem');
  writeFileSync(caFile, sink.ca);
  zone.set(SINK_HOST, 'A', ['127.0.0.1']);
  const addRecipientDomain = (name: string) => zone.set(name, 'MX', [{ exchange: SINK_HOST, priority: 10 }]);
  addRecipientDomain('example.net');
  addRecipientDomain('example.org');
  const baseOverrides = (extra?: DeepPartial<Config>): DeepPartial<Config> => ({
    ...(opts.overrides ?? {}),
    ...(extra ?? {}),
    outbound: { port: sink.port, allowLoopbackMx: true, caFile, signingWorkers: 1, ...(opts.overrides?.outbound ?? {}), ...(extra?.outbound ?? {}) },
  });
  let t0 = await startTestApp({ zone, clock: opts.clock, overrides: baseOverrides(), logger: opts.logger, resolver: opts.resolver });
  const domain = await addVerifiedDomain(t0, opts.domain ?? 'sender.dev');
  const resolver = toNodeStyleResolver(createDnsClient({ servers: [zone.server], timeoutMs: TEST_DNS_TIMEOUT_MS, tries: 2 }));
  const world: MailWorld = {
    get t0() {
      return t0;
    },
    sink,
    zone,
    domain,
    addRecipientDomain,
    async settle() {
      t0.app.engine.wake();
      await t0.app.engine.whenIdle();
      // what the last results set off after their commit (campaign counters) has run too
      await t0.app.services.events.settled();
    },
    async dkimStatus(raw: Buffer) {
      // loaded here: mailauth brings ~150 ms of modules that tests not verifying DKIM never need
      const { dkimVerify } = await import('mailauth/lib/dkim/verify.js');
      const result = await dkimVerify(raw, { resolver: resolver as never });
      const results = (result as { results: { status: { result: string } }[] }).results;
      return results.length ? results[0]!.status.result : 'none';
    },
    async restart(extra?: DeepPartial<Config>) {
      const dataDir = t0.dataDir;
      const key = t0.key;
      await t0.stop();
      t0 = await startTestApp({ zone, clock: opts.clock, dataDir, overrides: baseOverrides(extra), logger: opts.logger, resolver: opts.resolver });
      (t0 as { key: string }).key = key;
    },
    async startSecondSink(domain: string, behaviour?: Partial<SinkBehaviour> & { size?: number }) {
      // Each extra sink gets its own loopback address, so pooled connections to one are never
      // reused for another.
      const n = extraSinks.length + 2;
      if (n > EXTRA_SINKS + 1) throw new Error('too many extra sinks');
      const host = `mx${n}.sink.test`;
      const second = await startSmtpSink({ ...(behaviour ?? {}), hostname: host, cert, host: `127.0.0.${n}`, port: sink.port });
      extraSinks.push(second);
      zone.set(host, 'A', [`127.0.0.${n}`]);
      zone.set(domain, 'MX', [{ exchange: host, priority: 10 }]);
      return second;
    },
    async close() {
      // After restart() the app runs on a dataDir it was given, which its close() leaves behind.
      const dataDir = t0.dataDir;
      await t0.close();
      await dropDataDirDatabase(dataDir);
      rmSync(dataDir, { recursive: true, force: true });
      for (const s of extraSinks) await s.close();
      await sink.close();
      await zone.close();
      rmSync(caDir, { recursive: true, force: true });
    },
  };
  return world;
}

/** A minimal valid send body from the world's domain. */
export function sendBody(world: MailWorld, extra: Record<string, unknown> = {}) {
  return { from: `Sender <hello@${world.domain.name}>`, to: 'alice@example.net', subject: 'Hello', text: 'Hi there', ...extra };
}
