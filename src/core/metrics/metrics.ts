import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { PROVIDERS, providerOf, type Provider } from './provider-rollup.js';
import type { ShapingState } from '../shaping/shaping-view.js';

/*
 * Prometheus metrics (GET /metrics, docs/operations.md "Metrics"). Names follow Prometheus'
 * conventions (posthorn_ namespace, _total counters, _seconds and _bytes units) and the anchors'
 * vocabulary: delivered / deferred (KumoMTA's "transfail") / bounced / failed per provider, as
 * postfix_exporter splits its smtp status counters. Labels are small fixed sets: the provider
 * rollup (google, microsoft, yahoo, apple, other), the egress source, the route template.
 * One registry per app, so several apps in one process (the tests) do not share counters.
 */

export type DeliveryOutcome = 'delivered' | 'deferred' | 'bounced' | 'failed' | 'suppressed';

export interface OutcomeSample {
  outcome: DeliveryOutcome;
  recipientDomain: string;
  mxHost: string | null;
  /** The egress source used (the default one until sources are configured). */
  source: string;
  hardBounce?: boolean;
  /** When the email was accepted and when this outcome happened (epoch ms), for the latency histogram. */
  acceptedAtMs: number;
  atMs: number;
}

export interface MetricsSources {
  /** Queued deliveries by state, recipient domain and last MX host. */
  queue(): Promise<{ state: string; domain: string; mxHost: string | null; count: number }[]>;
  /** Open outbound SMTP connections by MX host. */
  connections(): Map<string, number>;
  /** Store files and their sizes in bytes. */
  storeFiles(): Promise<Record<string, number>>;
  /** The delivery engine's message memory: bytes held, messages waiting for room (zero without an engine). */
  messageMemory(): { bytes: number; waiting: number };
  /**
   * Bodies on their way in (intakeMemoryMb): bytes held by those being parsed and stored, bodies
   * waiting for room; bytes held in memory by those being received, and those received into spool files.
   */
  intakeMemory(): { bytes: number; waiting: number; receiving: number; spooled: number };
  /** Bounce notices of submitted mail waiting to be sent (absent: submission.bounceNotices off). */
  bounceNotices?(): Promise<{ waiting: number; deferred: number }>;
  /** This node's outbound port looks blocked (core/operators/port25-watch.ts). */
  port25Blocked(): boolean;
  /** Traffic shaping: holds in force and warm-up progress (absent: nothing to report). */
  shaping?(): Promise<Pick<ShapingState, 'holds' | 'sources'>>;
}

const LATENCY_BUCKETS_S = [0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600];
const HTTP_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/**
 * What a gauge that reads the store gets: the value, or undefined when the store cannot be read
 * then (PostgreSQL gone, a disk error). Its series are left out of that scrape, which still
 * answers everything else (process, HTTP, memory, the port): a rejected collect would fail the
 * whole scrape exactly when an operator needs the rest. /health says the store is down.
 */
async function fromStore<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch {
    return undefined;
  }
}

export function createMetrics(sources: MetricsSources) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  const accepted = new Counter({ name: 'posthorn_messages_accepted_total', help: 'Emails accepted (API, batch, SMTP submission, campaigns, double opt-in).', registers: [registry] });
  const byOutcome = {
    delivered: new Counter({ name: 'posthorn_messages_delivered_total', help: 'Recipients whose MX answered 250 to the message.', labelNames: ['provider', 'source'], registers: [registry] }),
    deferred: new Counter({ name: 'posthorn_messages_deferred_total', help: 'Attempts that failed temporarily (a recipient will be retried).', labelNames: ['provider', 'source'], registers: [registry] }),
    bounced: new Counter({ name: 'posthorn_messages_bounced_total', help: 'Recipients refused permanently; type hard (the mailbox does not exist) or soft.', labelNames: ['provider', 'source', 'type'], registers: [registry] }),
    failed: new Counter({ name: 'posthorn_messages_failed_total', help: 'Recipients given up on (retries ran out, TLS policy, operator bounce).', labelNames: ['provider', 'source'], registers: [registry] }),
    suppressed: new Counter({ name: 'posthorn_messages_suppressed_total', help: 'Recipients dropped at delivery time because they were suppressed after acceptance.', registers: [registry] }),
  };
  const latency = new Histogram({
    name: 'posthorn_delivery_latency_seconds',
    help: 'From acceptance to the MX answering 250, per recipient.',
    labelNames: ['provider'],
    buckets: LATENCY_BUCKETS_S,
    registers: [registry],
  });
  const http = new Counter({ name: 'posthorn_http_requests_total', help: 'HTTP requests by route template, method and status.', labelNames: ['method', 'route', 'status'], registers: [registry] });
  const httpDuration = new Histogram({
    name: 'posthorn_http_request_duration_seconds',
    help: 'HTTP request duration by route template and method.',
    labelNames: ['method', 'route'],
    buckets: HTTP_BUCKETS_S,
    registers: [registry],
  });
  const webhooks = new Counter({ name: 'posthorn_webhook_calls_total', help: 'Webhook calls by outcome (success, or why it failed).', labelNames: ['outcome'], registers: [registry] });
  const webhooksAutoDisabled = new Counter({ name: 'posthorn_webhook_endpoints_auto_disabled_total', help: 'Webhook endpoints this node auto-disabled (webhooks.disableAfterFailures events in a row failed every attempt).', registers: [registry] });
  const inbound = new Counter({ name: 'posthorn_inbound_messages_total', help: 'Messages taken by the inbound listener, by kind.', labelNames: ['kind'], registers: [registry] });
  const smtpRefused = new Counter({
    name: 'posthorn_smtp_refused_total',
    help: 'Connections and AUTHs the SMTP listeners refused by a per-client limit, by listener and reason (connections_per_ip, auth_lockout).',
    labelNames: ['listener', 'reason'],
    registers: [registry],
  });

  new Gauge({
    name: 'posthorn_queue_messages',
    help: 'Queued deliveries by state (ready, scheduled, deferred, inflight, suspended) and provider.',
    labelNames: ['state', 'provider'],
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await fromStore(() => sources.queue());
      if (!rows) return;
      const sums = new Map<string, number>();
      for (const r of rows) {
        const key = `${r.state}\u0000${providerOf(r.domain, r.mxHost)}`;
        sums.set(key, (sums.get(key) ?? 0) + r.count);
      }
      for (const state of ['ready', 'scheduled', 'deferred', 'inflight', 'suspended']) {
        for (const provider of PROVIDERS) this.set({ state, provider }, sums.get(`${state}\u0000${provider}`) ?? 0);
      }
    },
  });
  new Gauge({
    name: 'posthorn_connections_open',
    help: 'Open outbound SMTP connections by provider.',
    labelNames: ['provider'],
    registers: [registry],
    collect() {
      const sums = new Map<Provider, number>(PROVIDERS.map((p) => [p, 0]));
      for (const [host, n] of sources.connections()) {
        const p = providerOf('', host);
        sums.set(p, sums.get(p)! + n);
      }
      for (const [provider, n] of sums) this.set({ provider }, n);
    },
  });
  new Gauge({
    name: 'posthorn_store_file_bytes',
    help: 'Size of the store files: the SQLite database and its write-ahead log.',
    labelNames: ['file'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [file, bytes] of Object.entries((await fromStore(() => sources.storeFiles())) ?? {})) this.set({ file }, bytes);
    },
  });

  new Gauge({
    name: 'posthorn_outbound_port25_blocked',
    help: "1 while this node's outbound SMTP connections all fail to connect (several MX hosts of several domains, none reached in 15 minutes): port 25 looks blocked.",
    registers: [registry],
    collect() {
      this.set(sources.port25Blocked() ? 1 : 0);
    },
  });

  if (sources.bounceNotices) {
    const bounceNotices = sources.bounceNotices;
    new Gauge({
      name: 'posthorn_bounce_notices_queued',
      help: 'Bounce notices of submitted mail waiting to be sent, by state (waiting: not tried yet; deferred: the sender MX deferred it).',
      labelNames: ['state'],
      registers: [registry],
      async collect() {
        this.reset();
        const counts = await fromStore(bounceNotices);
        if (!counts) return;
        this.set({ state: 'waiting' }, counts.waiting);
        this.set({ state: 'deferred' }, counts.deferred);
      },
    });
  }

  const budgetGauges = (read: () => { bytes: number; waiting: number }, bytes: { name: string; help: string }, waiting: { name: string; help: string }) => {
    new Gauge({ ...bytes, registers: [registry], collect() { this.set(read().bytes); } });
    new Gauge({ ...waiting, registers: [registry], collect() { this.set(read().waiting); } });
  };
  budgetGauges(
    sources.messageMemory,
    { name: 'posthorn_message_memory_bytes', help: 'Message content the delivery engine holds now: bodies being composed, messages being sent (outbound.messageMemoryMb bounds it).' },
    { name: 'posthorn_messages_waiting_for_memory', help: "Messages waiting for room in the delivery engine's message memory before they are composed." },
  );
  budgetGauges(
    sources.intakeMemory,
    { name: 'posthorn_intake_memory_bytes', help: 'Received bodies (API requests, submitted and inbound mail) being parsed and stored now, in bytes (intakeMemoryMb bounds it).' },
    { name: 'posthorn_intake_waiting', help: 'Received bodies waiting for room before they are parsed and stored.' },
  );
  new Gauge({
    name: 'posthorn_receive_memory_bytes',
    help: 'Bodies being received or waiting for their turn, held in memory, in bytes (intakeMemoryMb bounds it; the rest go to spool files).',
    registers: [registry],
    collect() {
      this.set(sources.intakeMemory().receiving);
    },
  });
  new Gauge({
    name: 'posthorn_spooled_bodies',
    help: 'Bodies being received or waiting for their turn in spool files (<dataDir>/spool), because the memory for them was full.',
    registers: [registry],
    collect() {
      this.set(sources.intakeMemory().spooled);
    },
  });

  const parked = new Counter({
    name: 'posthorn_shaping_held_total',
    help: 'Deliveries traffic shaping put back unattempted, by source, provider and why (suspended, rate, warmup).',
    labelNames: ['source', 'provider', 'why'],
    registers: [registry],
  });
  if (sources.shaping) {
    const shaping = sources.shaping;
    new Gauge({
      name: 'posthorn_shaping_holds',
      help: 'Suspensions and throttles in force that remote replies put on a (source, rollup), by source, provider and kind.',
      labelNames: ['source', 'provider', 'kind'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const h of (await fromStore(shaping))?.holds ?? []) this.inc({ source: h.source, provider: providerOf(h.rollup, h.rollup), kind: h.kind });
      },
    });
    new Gauge({
      name: 'posthorn_warmup_messages',
      help: "Warm-up today per source and provider: messages sent (kind used) and the day's budget per rollup (kind budget; absent once the schedule is over).",
      labelNames: ['source', 'provider', 'kind'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const s of (await fromStore(shaping))?.sources ?? []) {
          if (!s.warmup) continue;
          if (s.warmup.budget !== null) this.set({ source: s.name, provider: 'any', kind: 'budget' }, s.warmup.budget);
          for (const r of s.warmup.rollups) this.inc({ source: s.name, provider: providerOf(r.rollup, r.rollup), kind: 'used' }, r.used);
        }
      },
    });
  }

  return {
    registry,
    contentType: registry.contentType,
    async render(): Promise<string> {
      // prom-client writes NaN (the event-loop delay's mean before its first sample) as "Nan":
      // the text format spells it "NaN", and parsers stricter than Prometheus' own reject the rest.
      return (await registry.metrics()).replace(/ Nan$/gm, ' NaN');
    },
    accepted(count = 1): void {
      accepted.inc(count);
    },
    outcome(s: OutcomeSample): void {
      if (s.outcome === 'suppressed') {
        byOutcome.suppressed.inc();
        return;
      }
      const provider = providerOf(s.recipientDomain, s.mxHost);
      if (s.outcome === 'bounced') byOutcome.bounced.inc({ provider, source: s.source, type: s.hardBounce ? 'hard' : 'soft' });
      else byOutcome[s.outcome].inc({ provider, source: s.source });
      if (s.outcome === 'delivered') latency.observe({ provider }, Math.max(0, s.atMs - s.acceptedAtMs) / 1000);
    },
    http(method: string, route: string, status: number, seconds: number): void {
      http.inc({ method, route, status: String(status) });
      httpDuration.observe({ method, route }, seconds);
    },
    webhookCall(outcome: string): void {
      webhooks.inc({ outcome });
    },
    webhookAutoDisabled(): void {
      webhooksAutoDisabled.inc();
    },
    inbound(kind: string): void {
      inbound.inc({ kind });
    },
    /** A connection or AUTH refused by a per-client limit of an SMTP listener (smtp/client-ip-limits.ts). */
    smtpRefused(listener: 'inbound' | 'submission', reason: string): void {
      smtpRefused.inc({ listener, reason });
    },
    /** Deliveries traffic shaping held back unattempted. */
    held(source: string, rollup: string, why: string, count: number): void {
      parked.inc({ source, provider: providerOf(rollup, rollup), why }, count);
    },
  };
}
export type Metrics = ReturnType<typeof createMetrics>;
