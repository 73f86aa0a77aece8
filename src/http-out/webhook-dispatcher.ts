import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { acknowledged, MAX_RESPONSE_BODY_BYTES, type AttemptOutcome, type ClaimedCall, type SignedRequest, type WebhookOutbox } from '../core/webhooks/webhook-outbox.js';
import { WebhookUrlError } from '../core/webhooks/url-policy.js';
import { WEBHOOK_MAX_IN_FLIGHT, WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT } from '../core/webhooks/webhook-retry.js';
import { nodeShare } from '../lib/node-share.js';
import { createWebhookAgents, postPinned } from './http-post.js';

export interface WebhookDispatcherOptions {
  outbox: WebhookOutbox;
  clock: Clock;
  logger: Logger;
  /** Per-attempt timeout (spec: 10 s). */
  timeoutMs: number;
  /** Told each attempt's outcome (success, http_<status>, timeout, error), for metrics. */
  onAttempt?: (outcome: string) => void;
  /** Calls in flight to one endpoint: a slow endpoint holds only its own slots. */
  perEndpointConcurrency?: number;
  /** Calls in flight in total (webhooks.maxInFlight). */
  maxInFlight?: number;
  /** Calls in flight to one host name, over all endpoints on it (webhooks.maxInFlightPerHost); 0 no cap. */
  maxInFlightPerHost?: number;
  /** Longest sleep when idle, in ms (real time): picks up retries whose time has come. */
  idlePollMs?: number;
  /** How often the store is scanned for due work this process was not told about, in ms (real time). */
  sweepIntervalMs?: number;
  /** Finished calls and attempts are kept this long (by the app clock). */
  retentionMs?: number;
  /** How often old calls are pruned, in ms (real time). */
  pruneIntervalMs?: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Delivers the webhook outbox. Work is tracked per endpoint: an in-memory hint of each
 * endpoint's earliest due call (fed by new events and scheduled retries, and by a periodic
 * sweep of the store that also finds work left by a crash or another node), and claims are
 * made per endpoint for its free slots only. So one slow or dead endpoint fills its own
 * slots and never holds back another endpoint, and the sending path never waits for any
 * of this: it only writes outbox rows.
 */
export class WebhookDispatcher {
  /** Calls in flight per endpoint and per host for the cluster, as configured (this node takes its share). */
  private readonly clusterPerEndpoint: number;
  private readonly clusterPerHost: number;
  /** This node's share of them (nodeShare over the live nodes; the whole limit on one node). */
  private perEndpoint: number;
  private readonly maxInFlight: number;
  private readonly idlePollMs: number;
  private readonly sweepIntervalMs: number;
  private readonly retentionMs: number;
  private readonly pruneIntervalMs: number;
  private readonly agents = createWebhookAgents();
  /** Endpoint id -> earliest due time (epoch ms, app clock) of work it may have. */
  private readonly due = new Map<string, number>();
  private readonly active = new Map<string, number>();
  /**
   * Host name -> calls in flight to it. Many endpoints (of one team or several) on one slow host
   * otherwise took every slot between them, each within its own 4, and every other host's
   * events waited for their timeouts.
   */
  private readonly activeByHost = new Map<string, number>();
  /**
   * Endpoint id -> the host name of its URL, learnt from the store before its first claim (so
   * that claim is already within its host's room) and from every call claimed (a changed URL).
   */
  private readonly hostOf = new Map<string, string | null>();
  private maxPerHost: number;
  /**
   * Endpoints whose latest attempt here failed. Together they may hold only half of the calls
   * in flight: endpoints that hang keep their slots for the whole timeout, and enough of them
   * (16 at 4 calls each) held every slot, so each healthy endpoint waited its turn behind all
   * of them for every call.
   */
  private readonly failing = new Set<string>();
  private readonly failingShare: number;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly inFlightCalls = new Set<number>();
  /** Calls whose attempts ended while a claim was being made (none between claims). */
  private endedDuringClaim: Set<number> | undefined;
  private running = false;
  private loopDone: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private pendingWake = false;
  private idleWaiters: (() => void)[] = [];
  private lastSweep = 0;
  private lastPrune = 0;
  private readonly outbox: WebhookOutbox;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly timeoutMs: number;
  private readonly onAttempt: ((outcome: string) => void) | undefined;

  constructor(options: WebhookDispatcherOptions) {
    this.outbox = options.outbox;
    this.clock = options.clock;
    this.logger = options.logger;
    this.timeoutMs = options.timeoutMs;
    this.onAttempt = options.onAttempt;
    this.clusterPerEndpoint = this.perEndpoint = options.perEndpointConcurrency ?? WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT;
    this.maxInFlight = options.maxInFlight ?? WEBHOOK_MAX_IN_FLIGHT;
    this.clusterPerHost = this.maxPerHost = options.maxInFlightPerHost || Infinity;
    this.failingShare = Math.max(1, Math.floor(this.maxInFlight / 2));
    this.idlePollMs = options.idlePollMs ?? 1000;
    this.sweepIntervalMs = options.sweepIntervalMs ?? 30_000;
    this.retentionMs = options.retentionMs ?? 30 * DAY_MS;
    this.pruneIntervalMs = options.pruneIntervalMs ?? 60 * 60_000;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.lastPrune = performance.now();
    this.loopDone = this.loop().catch((err) => this.logger.fatal({ err }, 'webhook dispatcher loop crashed'));
  }

  /**
   * The live nodes of the cluster (the heartbeat tells, PostgreSQL only): the per-endpoint and
   * per-host caps are promises to the receiving servers, kept in each node's memory, so each
   * node takes its share of them. Calls in flight above a smaller share finish; no new one
   * starts until the node is back under it.
   */
  setLiveNodes(n: number): void {
    const perEndpoint = nodeShare(this.clusterPerEndpoint, n);
    const perHost = nodeShare(this.clusterPerHost, n);
    if (perEndpoint === this.perEndpoint && perHost === this.maxPerHost) return;
    const grew = perEndpoint > this.perEndpoint || perHost > this.maxPerHost;
    this.perEndpoint = perEndpoint;
    this.maxPerHost = perHost;
    if (grew) this.wake();
  }

  /** This node's caps now (its share of the cluster's). */
  get caps(): { perEndpoint: number; perHost: number } {
    return { perEndpoint: this.perEndpoint, perHost: this.maxPerHost };
  }

  /** An endpoint has work due at `dueMs` (new event or scheduled retry). */
  noteDue(webhookId: string, dueMs: number): void {
    const current = this.due.get(webhookId);
    if (current === undefined || dueMs < current) this.due.set(webhookId, dueMs);
  }

  /** New work was committed, or the clock moved in a test: look now instead of at the next poll. */
  wake(): void {
    this.pendingWake = true;
    this.wakeUp?.();
  }

  /** Resolves once nothing is in flight and nothing is due (by the app clock). */
  whenIdle(): Promise<void> {
    return new Promise((resolve) => {
      this.idleWaiters.push(resolve);
      this.wake();
    });
  }

  /** Stops claiming and waits for in-flight calls to be recorded (each is bounded by the timeout). */
  async stop(): Promise<void> {
    this.running = false;
    this.wakeUp?.();
    await this.loopDone;
    await Promise.allSettled([...this.inFlight]);
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  private async loop(): Promise<void> {
    while (this.running) {
      this.pendingWake = false;
      await this.housekeeping();
      let started = 0;
      try {
        started = await this.claimRound();
      } catch (err) {
        this.logger.error({ err }, 'claiming webhook calls failed');
      }
      if (started === 0) {
        const now = this.clock.nowMs();
        const dueNow = [...this.due.values()].some((d) => d <= now);
        if (this.inFlight.size === 0 && !dueNow) this.notifyIdle();
        if (!this.pendingWake && this.running) await this.sleep(this.sleepMs(now));
      }
    }
  }

  private async housekeeping(): Promise<void> {
    const t = performance.now();
    if (this.lastSweep === 0 || t - this.lastSweep >= this.sweepIntervalMs) {
      this.lastSweep = t;
      try {
        for (const d of await this.outbox.dueByWebhook()) this.noteDue(d.webhookId, d.dueAt);
        // A failing endpoint with no work left (its calls abandoned, or it was deleted) starts
        // afresh with its next event; the set stays small.
        for (const id of this.failing) if (!this.due.has(id) && !this.active.has(id)) this.failing.delete(id);
        // Learnt again when work comes (the URL may have changed meanwhile, or the endpoint gone).
        for (const id of this.hostOf.keys()) if (!this.due.has(id) && !this.active.has(id)) this.hostOf.delete(id);
      } catch (err) {
        this.logger.error({ err }, 'scanning for due webhook calls failed');
      }
    }
    if (t - this.lastPrune >= this.pruneIntervalMs) {
      this.lastPrune = t;
      try {
        const pruned = await this.outbox.prune(this.retentionMs);
        if (pruned) this.logger.info({ pruned }, 'pruned old webhook attempts');
      } catch (err) {
        this.logger.error({ err }, 'pruning webhook attempts failed');
      }
    }
  }

  /** One pass over endpoints with due work; returns how many calls were started. */
  private async claimRound(): Promise<number> {
    let started = 0;
    const now = this.clock.nowMs();
    let failingBusy = this.failingInFlight();
    for (const [webhookId, dueAt] of [...this.due]) {
      if (!this.running || this.inFlight.size >= this.maxInFlight) break;
      if (dueAt > now) continue;
      const failing = this.failing.has(webhookId);
      let free = Math.min(this.perEndpoint - (this.active.get(webhookId) ?? 0), this.maxInFlight - this.inFlight.size);
      if (failing) free = Math.min(free, this.failingShare - failingBusy);
      if (free <= 0) continue;
      if (this.maxPerHost !== Infinity) {
        // Endpoints on a full host wait (woken by a call to it ending); other hosts' go on.
        const host = await this.hostOfEndpoint(webhookId);
        if (host !== null) free = Math.min(free, this.maxPerHost - (this.activeByHost.get(host) ?? 0));
        if (free <= 0) continue;
      }
      // What is noted for this endpoint from here on (an attempt of its that records a retry,
      // an event that commits) may be newer than what the store answers below, on another
      // connection: it is merged with that answer, never overwritten by it.
      this.due.delete(webhookId);
      // Until the store says otherwise, look again next round.
      let next: number | null = dueAt;
      const ended = (this.endedDuringClaim = new Set<number>());
      try {
        let calls: ClaimedCall[];
        try {
          calls = await this.outbox.claim(webhookId, free);
        } finally {
          this.endedDuringClaim = undefined;
        }
        for (const call of calls) {
          // Our own lease can only be re-taken if the app clock jumped past it mid-call (or the
          // process stalled that long). Such a call still in flight is not posted twice; nor is
          // one whose attempt ended while the claim was made (its row was taken before its
          // result was written): the result is recorded, or its lease runs out and it is retried.
          if (this.inFlightCalls.has(call.id) || ended.has(call.id)) continue;
          this.track(call);
          started++;
          if (failing) failingBusy++;
        }
        // Nothing more due and unleased right now: remember when the next one is.
        if (calls.length < free) next = await this.outbox.nextDueForWebhook(webhookId);
      } catch (err) {
        // The store is away or refusing (a failover, a full disk): look again after an idle
        // poll, as the delivery engine does, not in a loop of failed claims and error lines.
        next = Math.max(dueAt, this.clock.nowMs() + this.idlePollMs);
        throw err;
      } finally {
        if (next !== null) this.noteDue(webhookId, next);
      }
    }
    return started;
  }

  private sleepMs(now: number): number {
    // A full endpoint (or a full dispatcher) is woken by a finishing call, not by the clock.
    if (this.inFlight.size >= this.maxInFlight) return this.idlePollMs;
    const failingFull = this.failingInFlight() >= this.failingShare;
    let next = Infinity;
    for (const [webhookId, d] of this.due) {
      if ((this.active.get(webhookId) ?? 0) >= this.perEndpoint || (failingFull && this.failing.has(webhookId))) continue;
      const host = this.hostOf.get(webhookId);
      if (host && (this.activeByHost.get(host) ?? 0) >= this.maxPerHost) continue;
      next = Math.min(next, d);
    }
    return Math.max(1, Math.min(this.idlePollMs, next - now));
  }

  /** The host name an endpoint's calls go to (null: gone, or a URL with none). */
  private async hostOfEndpoint(webhookId: string): Promise<string | null> {
    let host = this.hostOf.get(webhookId);
    if (host === undefined) {
      const url = await this.outbox.endpointUrl(webhookId);
      host = url === null ? null : hostName(url);
      this.hostOf.set(webhookId, host);
    }
    return host;
  }

  private failingInFlight(): number {
    let n = 0;
    for (const id of this.failing) n += this.active.get(id) ?? 0;
    return n;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref?.();
      this.wakeUp = done;
    });
  }

  private notifyIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  private track(call: ClaimedCall): void {
    this.active.set(call.webhookId, (this.active.get(call.webhookId) ?? 0) + 1);
    // Counted against the host the call really goes to: its URL as claimed.
    const host = hostName(call.url);
    if (host !== null) {
      this.hostOf.set(call.webhookId, host);
      this.activeByHost.set(host, (this.activeByHost.get(host) ?? 0) + 1);
    }
    this.inFlightCalls.add(call.id);
    const p = this.deliver(call);
    this.inFlight.add(p);
    void p.finally(() => {
      this.inFlight.delete(p);
      this.inFlightCalls.delete(call.id);
      this.endedDuringClaim?.add(call.id);
      const left = (this.active.get(call.webhookId) ?? 1) - 1;
      if (left <= 0) this.active.delete(call.webhookId);
      else this.active.set(call.webhookId, left);
      if (host !== null) {
        const onHost = (this.activeByHost.get(host) ?? 1) - 1;
        if (onHost <= 0) this.activeByHost.delete(host);
        else this.activeByHost.set(host, onHost);
      }
      // A freed slot may let this endpoint's next call go.
      this.wake();
    });
  }

  private async deliver(call: ClaimedCall): Promise<void> {
    let request: SignedRequest | undefined;
    let outcome: AttemptOutcome;
    const started = performance.now();
    try {
      request = this.outbox.signedRequest(call);
      // Checked again right before connecting: the name may now point somewhere internal.
      const target = await this.outbox.resolveTarget(call.url);
      outcome = await postPinned(target, request.headers, request.body, {
        timeoutMs: this.timeoutMs,
        maxBodyBytes: MAX_RESPONSE_BODY_BYTES,
        agents: this.agents,
      });
    } catch (err) {
      const message = err instanceof WebhookUrlError && err.problem === 'private' ? `refused: ${err.message}` : (err as Error).message;
      outcome = { status: null, body: null, error: message, durationMs: performance.now() - started };
    }
    if (acknowledged(outcome)) this.failing.delete(call.webhookId);
    else this.failing.add(call.webhookId);
    this.onAttempt?.(attemptLabel(outcome));
    try {
      const next = await this.outbox.recordAttempt(call, request ?? { url: call.url, headers: {}, body: call.body }, outcome, () => this.running);
      if (next !== null) this.noteDue(call.webhookId, next);
    } catch (err) {
      // The lease expires and the call is attempted again: at-least-once, never lost. Noted
      // as due then, or nothing but the (slow) store sweep would look at this endpoint again.
      this.logger.error({ err, webhookId: call.webhookId, eventId: call.eventId }, 'recording a webhook attempt failed');
      this.noteDue(call.webhookId, this.clock.nowMs() + this.outbox.leaseMs + 1);
    }
  }
}

/** The host name of a URL (lower case, as the URL parser gives it; the port is not part of it), or null. */
function hostName(url: string): string | null {
  try {
    return new URL(url).hostname.replace(/\.$/, '') || null;
  } catch {
    return null;
  }
}

/** A small fixed set of outcome labels: success, http_4xx / http_5xx / http_3xx, timeout, error. */
function attemptLabel(outcome: AttemptOutcome): string {
  if (outcome.status !== null) return outcome.status >= 200 && outcome.status < 300 ? 'success' : `http_${Math.floor(outcome.status / 100)}xx`;
  return /timed? ?out|timeout/i.test(outcome.error ?? '') ? 'timeout' : 'error';
}
