/**
 * A sending world for transport security (MTA-STS, DANE, TLS-RPT): a DNS zone, a test CA the
 * app trusts (outbound.caFile), MX sinks on 127.0.0.N presenting the certificates a test asks
 * for, and one HTTPS server playing every mta-sts.<domain> policy host and https report target.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../../src/config/defaults.js';
import type { DeepPartial } from '../../src/config/load.js';
import type { Clock } from '../../src/lib/clock.js';
import { addVerifiedDomain } from './domain-fixtures.js';
import { startDnsZone, type DnsZone } from './dns-zone.js';
import { startPolicyServer, stsPolicyText, type PolicyServer } from './policy-server.js';
import { startSmtpSink, type SinkBehaviour, type SmtpSink } from './smtp-sink.js';
import { createTestCa, selfSignedLeaf, type TestCa } from './test-ca.js';
import { startTestApp, type TestApp } from './test-app.js';

export type CertKind = 'good' | 'wrong-name' | 'expired' | 'self-signed' | 'cn-only';

export interface Mx {
  host: string;
  address: string;
  sink: SmtpSink;
  /** The leaf certificate the MX presents (PEM). */
  leafPem: string;
  /** Full chain as presented (leaf, then the CA for CA-signed ones). */
  chainPem: string;
  /** MAIL FROM commands this MX has seen. */
  mailFroms: () => number;
}

export interface TlsWorld {
  t0: TestApp;
  zone: DnsZone;
  ca: TestCa;
  policy: PolicyServer;
  /** The first MX, mx1.tls.test on 127.0.0.1, with a good certificate. */
  mx1: Mx;
  /** The verified sending domain (API shape). */
  domain: any;
  /** Starts an MX named `host` on the next loopback address with a certificate of that kind. */
  addMx(host: string, kind: CertKind, behaviour?: Partial<SinkBehaviour>): Promise<Mx>;
  /** Points `domain`'s MX records at these hosts (in preference order). */
  setMx(domain: string, hosts: string[]): void;
  /** Publishes an MTA-STS policy for `domain`: the TXT record with `id`, the policy host's A record, the policy file. */
  publishSts(domain: string, mode: 'enforce' | 'testing' | 'none', mx: string[], id: string, maxAge?: number): void;
  settle(): Promise<void>;
  restart(overrides?: DeepPartial<Config>): Promise<void>;
  close(): Promise<void>;
}

const SENDER = 'sender.dev';

export async function startTlsWorld(opts: { clock?: Clock; policyDomains: string[]; overrides?: DeepPartial<Config> }): Promise<TlsWorld> {
  const zone = await startDnsZone();
  const ca = await createTestCa();
  const policyCert = await ca.issue({ hostnames: opts.policyDomains.flatMap((d) => [`mta-sts.${d}`, `reports.${d}`]) });
  const policy = await startPolicyServer(policyCert);
  const dir = mkdtempSync(join(tmpdir(), 'posthorn-tls-world-'));
  const caFile = join(dir, 'ca.pem');
  writeFileSync(caFile, ca.pem);

  const mxs: Mx[] = [];
  async function startMx(host: string, kind: CertKind, address: string, port: number, behaviour?: Partial<SinkBehaviour>): Promise<Mx> {
    const now = Date.now();
    const tls =
      kind === 'good'
        ? await ca.issue({ hostnames: [host], ips: [address] })
        : kind === 'wrong-name'
          ? await ca.issue({ hostnames: [`not-${host}`], ips: [address] })
          : kind === 'expired'
            ? await ca.issue({ hostnames: [host], ips: [address], notBefore: new Date(now - 30 * 86_400_000), notAfter: new Date(now - 86_400_000) })
            : kind === 'cn-only'
              ? await ca.issue({ hostnames: [host], san: false })
              : await selfSignedLeaf([host]);
    let mailFroms = 0;
    const sink = await startSmtpSink({
      ...(behaviour ?? {}),
      onMailFrom: (a) => {
        mailFroms++;
        return behaviour?.onMailFrom?.(a);
      },
      hostname: host,
      cert: { key: tls.key, cert: tls.cert },
      host: address,
      port,
    });
    zone.set(host, 'A', [address]);
    const mx: Mx = { host, address, sink, leafPem: tls.leafPem, chainPem: tls.cert, mailFroms: () => mailFroms };
    mxs.push(mx);
    return mx;
  }

  // The first MX fixes the outbound port every other one shares (on its own loopback address).
  const first = await startMx('mx1.tls.test', 'good', '127.0.0.1', 0);
  const smtpPort = first.sink.port;
  const baseOverrides = (extra?: DeepPartial<Config>): DeepPartial<Config> => ({
    ...(opts.overrides ?? {}),
    ...(extra ?? {}),
    outbound: {
      port: smtpPort,
      allowLoopbackMx: true,
      caFile,
      signingWorkers: 1,
      ...(opts.overrides?.outbound ?? {}),
      ...(extra?.outbound ?? {}),
      mtaSts: { httpsPort: policy.port, fetchTimeoutMs: 3000, allowPrivate: true, ...(opts.overrides?.outbound?.mtaSts ?? {}) },
      tlsReports: { allowPrivate: true, ...(opts.overrides?.outbound?.tlsReports ?? {}) },
    },
  });
  let t0 = await startTestApp({ zone, clock: opts.clock, overrides: baseOverrides() });
  const domain = await addVerifiedDomain(t0, SENDER);

  return {
    get t0() {
      return t0;
    },
    zone,
    ca,
    policy,
    mx1: first,
    domain,
    addMx: (host, kind, behaviour) => startMx(host, kind, `127.0.0.${mxs.length + 1}`, smtpPort, behaviour),
    setMx(d, hosts) {
      zone.set(
        d,
        'MX',
        hosts.map((exchange, i) => ({ exchange, priority: 10 * (i + 1) })),
      );
    },
    publishSts(d, mode, mx, id, maxAge = 86400) {
      zone.set(`_mta-sts.${d}`, 'TXT', [`v=STSv1; id=${id};`]);
      zone.set(`mta-sts.${d}`, 'A', ['127.0.0.1']);
      policy.setPolicy(d, stsPolicyText(mode, mx, maxAge));
    },
    async settle() {
      t0.app.engine.wake();
      await t0.app.engine.whenIdle();
    },
    async restart(extra) {
      const dataDir = t0.dataDir;
      const key = t0.key;
      await t0.stop();
      t0 = await startTestApp({ zone, clock: opts.clock, dataDir, overrides: baseOverrides(extra) });
      (t0 as { key: string }).key = key;
    },
    async close() {
      const dataDir = t0.dataDir;
      await t0.close();
      rmSync(dataDir, { recursive: true, force: true });
      for (const m of mxs) await m.sink.close();
      await policy.close();
      await zone.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A send from the world's domain to one recipient. */
export function tlsSend(to: string, extra: Record<string, unknown> = {}) {
  return { from: `Sender <hello@${SENDER}>`, to, subject: 'Transport security', text: 'Hi there', ...extra };
}

/** Sends `tlsSend(to)` through the API and waits until the engine is idle; the email's id. */
export async function sendAndSettle(w: TlsWorld, to: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: tlsSend(to) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  await w.settle();
  return res.body.emailId;
}
