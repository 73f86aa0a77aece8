import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { AttemptResult, AttemptTrace, DeliveryGroup, DeliveryService } from '../../core/deliveries/delivery-service.js';
import { verdictSummary, type TlsVerdict } from '../../core/tls-reports/tls-verdict.js';
import { ByteBudget } from '../../lib/byte-budget.js';
import { SharedMessages } from './shared-messages.js';
import type { MessageFactory } from './message-factory.js';
import { MxLookupError, type MxResolver } from './mx-resolver.js';
import type { DeliveryTarget, SmtpClientPool, TransactionRequest, TransactionResult } from './smtp-client-pool.js';
import type { PlannedHost, TransportPolicy } from './transport-policy.js';
import type { ShapingPlan, TrafficShaper } from '../../core/shaping/traffic-shaper.js';
import { yieldTurn } from '../../lib/turn-yield.js';
import { WakeSchedule } from './wake-schedule.js';

/** Which email a transaction carries, for a transport that files messages by email (the sandbox). */
export interface TransactionContext {
  email: DeliveryGroup['email'];
  domain: NonNullable<DeliveryGroup['domain']>;
}

/**
 * Where the engine hands a signed message to the network: the SMTP client pool, or in sandbox
 * mode the capture mailbox (sandbox-transport.ts). Everything before it is the same pipeline.
 */
export interface MessageTransport {
  send(target: DeliveryTarget, req: TransactionRequest, context: TransactionContext): Promise<TransactionResult>;
  abandonQueued: SmtpClientPool['abandonQueued'];
}

export interface DeliveryEngineOptions {
  deliveries: DeliveryService;
  messages: MessageFactory;
  mx: MxResolver;
  pool: MessageTransport;
  clock: Clock;
  logger: Logger;
  /** Destination SMTP port (25; tests use their sink's). */
  port: number;
  /**
   * When set, every transaction goes to this one target (the relay, or the sandbox's capture
   * mailbox); MX lookup is skipped.
   */
  route?: { host: string; address?: string; port: number };
  /**
   * The VERP token of one transaction's return path (core/received/return-path-token.ts): of its
   * one recipient, or (`recipient` absent) of its several at `rcptDomain`. The email id when unset.
   */
  returnPathToken?: (emailId: string, rcptDomain: string, recipient?: string) => string;
  /**
   * The recipient domains' transport security (MTA-STS, DANE) and the sending domain's TLS
   * policy, per MX host (transport-policy.ts). Absent: the domain's tlsPolicy alone. Not used
   * with a fixed route (a relay is who talks to the MX hosts; the sandbox talks to none).
   */
  transport?: TransportPolicy;
  /** Every session's TLS verdict, for TLS reporting (RFC 8460). Called once per attempt. */
  onTlsVerdicts?: (verdicts: TlsVerdict[]) => void;
  /** Deliveries claimed per round. */
  claimBatch?: number;
  /** Groups (transactions) in flight at once; the pool applies per-host and global connection limits. */
  maxInFlight?: number;
  /**
   * Groups in flight at once for one destination domain (default 20, Postfix's
   * default_destination_concurrency_limit). Without it a destination that stalls every session
   * (a tarpit, a host that never answers MAIL FROM) fills the whole in-flight window with groups
   * queued behind its connection limit, and mail to every other domain waits for its timeouts.
   */
  maxInFlightPerDomain?: number;
  /** Poll interval when idle, in ms: picks up retries whose time has come. */
  idlePollMs?: number;
  /** MX hosts/addresses tried per attempt before deferring. */
  maxTargetsPerAttempt?: number;
  /**
   * Egress sources, per-(source, rollup) limits, holds from replies and warm-up
   * (core/shaping/traffic-shaper.ts). Absent (sandbox mode): the pool's defaults, no shaping.
   */
  shaper?: Pick<TrafficShaper, 'take' | 'recordWarmup' | 'observeReply' | 'maybeRefresh'>;
  /** Deliveries the shaper held back unattempted (metrics). */
  onHeld?: (why: string, source: string, rollup: string, count: number) => void;
  /** Bytes of message content held at once (shared-messages.ts); default 64 MiB. */
  messageBudgetBytes?: number;
}

/**
 * Claims due deliveries, groups them by (email, destination domain), builds and signs each
 * email once, resolves MX hosts, hands the group's SMTP transactions (one per recipient unless a
 * shaping rule groups them) to the connection pool and records what happened through the core
 * delivery service. Stateless between rounds: everything it needs to resume lives in the store.
 */
export class DeliveryEngine {
  private readonly claimBatch: number;
  private readonly maxInFlight: number;
  private readonly maxPerDomain: number;
  /** Groups in flight per destination domain (only domains with some). */
  private readonly inFlightByDomain = new Map<string, number>();
  private readonly idlePollMs: number;
  private readonly maxTargets: number;
  private readonly inFlight = new Set<Promise<void>>();
  /** Delivery ids being attempted by this process right now. */
  private readonly inFlightDeliveries = new Set<number>();
  /** Delivery ids whose attempts ended while the current claim was being made (none between claims). */
  private endedDuringClaim: Set<number> | undefined;
  readonly budget: ByteBudget;
  private readonly signedMessages: SharedMessages;
  private running = false;
  private loopDone: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private slotFreed: (() => void) | undefined;
  private pendingWake = false;
  private idleWaiters: (() => void)[] = [];
  /** Claims again when parked mail becomes due. */
  private readonly wakeSchedule: WakeSchedule;

  constructor(private readonly options: DeliveryEngineOptions) {
    this.claimBatch = options.claimBatch ?? 500;
    this.maxInFlight = options.maxInFlight ?? 300;
    this.maxPerDomain = options.maxInFlightPerDomain ?? 20;
    this.idlePollMs = options.idlePollMs ?? 1000;
    this.maxTargets = options.maxTargetsPerAttempt ?? 6;
    this.budget = new ByteBudget(options.messageBudgetBytes ?? 64 * 1024 * 1024);
    this.signedMessages = new SharedMessages(this.budget);
    this.wakeSchedule = new WakeSchedule(options.clock, () => this.wake(), () => this.running);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop().catch((err) => this.options.logger.fatal({ err }, 'delivery engine loop crashed'));
  }

  /** New work was committed (or the clock moved in a test): claim now instead of at the next poll. */
  wake(): void {
    this.pendingWake = true;
    this.wakeUp?.();
  }

  /** Resolves once nothing is in flight and the last claim round found nothing due. */
  whenIdle(): Promise<void> {
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Stops claiming and waits for the transactions on the wire to be recorded. Transactions
   * still waiting for a session to a busy host (with a slow or stalling one, minutes each behind
   * those ahead of them), and those not yet handed to the pool, go back to the queue
   * unattempted instead of holding the shutdown past the service manager's patience. The pool
   * stays open: the engine may be started again (the benchmark pauses it).
   */
  async stop(): Promise<void> {
    this.running = false;
    this.wakeSchedule.stop();
    this.wakeUp?.();
    this.slotFreed?.();
    await this.loopDone;
    this.options.pool.abandonQueued();
    await Promise.allSettled([...this.inFlight]);
  }

  private async loop(): Promise<void> {
    while (this.running) {
      // Claim in large batches: wait until half the in-flight capacity is free, so each
      // claim round trip takes many rows instead of one per finished transaction.
      if (this.inFlight.size >= Math.max(1, this.maxInFlight / 2)) {
        // No claim, so no lease renewal in it, until a slot frees: the leases of the work in
        // flight are kept from here, looked at every idle poll.
        try {
          await this.options.deliveries.keepLeases(this.inFlightDeliveries);
        } catch (err) {
          this.options.logger.error({ err }, 'renewing the leases of deliveries in flight failed');
        }
        // Attempts that ended, or a stop() that came, during the renewal found no waiter to wake.
        if (!this.running || this.inFlight.size < Math.max(1, this.maxInFlight / 2)) continue;
        // One waiter, woken by whichever transaction finishes next (Promise.race over
        // hundreds of in-flight promises on every wake-up was measurable CPU).
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.idlePollMs);
          timer.unref?.();
          this.slotFreed = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        continue;
      }
      this.pendingWake = false;
      let groups: DeliveryGroup[] = [];
      const full = [...this.inFlightByDomain].filter(([, n]) => n >= this.maxPerDomain).map(([domain]) => domain);
      this.endedDuringClaim = new Set();
      try {
        // Holds an operator lifted, or put in place, from another process (a few seconds late at most).
        await this.options.shaper?.maybeRefresh();
        groups = await this.options.deliveries.claim(Math.min(this.claimBatch, this.maxInFlight - this.inFlight.size), full, this.inFlightDeliveries);
      } catch (err) {
        this.options.logger.error({ err }, 'claiming deliveries failed');
      }
      const ended = this.endedDuringClaim;
      this.endedDuringClaim = undefined;
      const heldBack: DeliveryGroup[] = [];
      for (const g of groups) {
        // The claim keeps the leases of what is in flight, but one can still run out (the
        // renewal failed, the store was away): the sweep frees the rows and this claim takes
        // them again. Attempting them again would send the message twice. Those still in flight
        // keep the fresh lease (theirs now). Those whose attempt ended while the claim was
        // being made (its rows taken before its results were written) go back: the results
        // cleared the lease, or (an attempt that never started) they are due again, unattempted.
        const fresh = g.deliveries.filter((d) => !this.inFlightDeliveries.has(d.id) && !ended.has(d.id));
        const over = fresh.length === g.deliveries.length ? [] : g.deliveries.filter((d) => ended.has(d.id) && !this.inFlightDeliveries.has(d.id));
        if (over.length) heldBack.push({ ...g, deliveries: over });
        if (fresh.length === 0) continue;
        const group = fresh.length === g.deliveries.length ? g : { ...g, deliveries: fresh };
        // One claim can take more of a domain than it may have in flight: the rest goes back,
        // still due, and later claims skip the domain until some of its groups have finished.
        if ((this.inFlightByDomain.get(g.rcptDomain) ?? 0) >= this.maxPerDomain) {
          heldBack.push(group);
          continue;
        }
        this.track(this.process(group), g.rcptDomain);
      }
      if (heldBack.length) {
        try {
          await this.options.deliveries.releaseGroups(heldBack);
        } catch (err) {
          // Their leases run out and the sweep frees them: late, never lost.
          this.options.logger.error({ err }, 'releasing deliveries held back for a busy destination failed');
        }
      }
      if (groups.length === 0) {
        // A wake() that arrived while this claim ran (work committed, or a test's clock moved)
        // may have made something due that this round did not see: not idle until a round
        // that started after it finds nothing (whenIdle() resolved early otherwise).
        if (this.inFlight.size === 0 && !this.pendingWake) this.notifyIdle();
        // stop() may have run while this claim was awaited: its wakeUp() found no sleeper, and a
        // sleep now (on an unref'd timer) would leave stop() waiting on a loop that a process
        // with nothing else to do exits under, its promise never settled.
        if (!this.pendingWake && this.running) await this.sleep();
      }
    }
  }

  private notifyIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  private sleep(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.idlePollMs);
      timer.unref?.();
      // Finished work frees capacity: track() calls wakeUp so the loop claims more.
      this.wakeUp = done;
    });
  }

  private track(p: Promise<void>, domain: string): void {
    this.inFlight.add(p);
    this.inFlightByDomain.set(domain, (this.inFlightByDomain.get(domain) ?? 0) + 1);
    void p.finally(() => {
      this.inFlight.delete(p);
      const left = (this.inFlightByDomain.get(domain) ?? 1) - 1;
      if (left > 0) this.inFlightByDomain.set(domain, left);
      else this.inFlightByDomain.delete(domain);
      const freed = this.slotFreed;
      this.slotFreed = undefined;
      freed?.();
      // A claim round under way may have skipped this domain as full: it must not end in idle.
      this.pendingWake = true;
      this.wakeUp?.();
    });
  }

  /** The group's signed message; its body is read only now, within the memory budget. */
  private async build(group: DeliveryGroup): Promise<Buffer> {
    const body = await this.options.deliveries.bodyOf(group.email.id);
    if (!body) throw new Error('the email was deleted before its message was composed');
    // Every accepted email has text or HTML: none means its content was emptied (content
    // retention), and a message without it must never go out.
    if (!body.text_body && !body.html_body) throw new Error('the email has no content left (retention.contentDays): nothing to send');
    // An HTML message's tracking takes this thread ~0.3 ms (5 KB; its text alternative is made by the composer):
    // the hundreds a claim starts together take turns with the API (turn-yield.ts).
    if (body.html_body) await yieldTurn();
    return this.options.messages.build(group.email, body, group.domain!);
  }

  private async process(group: DeliveryGroup): Promise<void> {
    for (const d of group.deliveries) this.inFlightDeliveries.add(d.id);
    try {
      await this.attemptAndRecord(group);
    } finally {
      this.ended(group.deliveries);
    }
  }

  /** Deliveries whose attempt is over (recorded, parked or released): no longer this process's to keep. */
  private ended(deliveries: DeliveryGroup['deliveries']): void {
    for (const d of deliveries) {
      this.inFlightDeliveries.delete(d.id);
      this.endedDuringClaim?.add(d.id);
    }
  }

  private async attemptAndRecord(group: DeliveryGroup): Promise<void> {
    const all = (outcome: AttemptResult['outcome'], response: string, extra: Partial<AttemptResult> = {}) =>
      group.deliveries.map((d) => ({ deliveryId: d.id, outcome, response, ...extra }));
    if (!group.domain) {
      // The claim rejects these already (a domain deleted between the claim and here).
      await this.record(group, null, all('rejected', 'the sending domain was deleted before delivery'), []);
      return;
    }
    const verdicts: TlsVerdict[] = [];
    let holdsMessage = false;
    try {
      const routed = await this.routeOf(group, verdicts);
      if ('results' in routed) {
        await this.record(group, null, routed.results, []);
        return;
      }
      let message: Buffer | undefined;
      let rest = group.deliveries;
      // Traffic shaping sends the recipients in several transactions (one each unless a rule
      // groups them, the warm-up budget's remainder) and holds back what may not go now: not an
      // attempt. Without a shaper (the sandbox) the group is one transaction.
      while (rest.length) {
        let chunk = rest;
        let plan: Extract<ShapingPlan, { kind: 'send' }> | undefined;
        const shaper = this.options.shaper;
        if (shaper) {
          const p = await shaper.take(group.egressPool ?? null, group.rcptDomain, routed.mxHost, rest.length, rest.map((d) => d.id));
          if (p.kind === 'hold') {
            await this.park({ ...group, deliveries: rest }, p.until, p.reason);
            this.options.onHeld?.(p.why, p.source, p.rollup, rest.length);
            return;
          }
          plan = p;
          chunk = rest.slice(0, p.count);
        }
        rest = rest.slice(chunk.length);
        const part = chunk.length === group.deliveries.length ? group : { ...group, deliveries: chunk };
        if (!message) {
          holdsMessage = true;
          try {
            message = await this.signedMessages.take(group.email.id, group.email.body_bytes, () => this.build(group));
          } catch (err) {
            this.options.logger.error({ err, emailId: group.email.id }, 'building or signing the message failed');
            await this.record({ ...group, deliveries: [...chunk, ...rest] }, null, [...chunk, ...rest].map((d) => ({ deliveryId: d.id, outcome: 'deferred' as const, response: `local error while preparing the message: ${(err as Error).message}` })), []);
            return;
          }
          // stop() came while the message waited for room or was built: the pool has already
          // let go of what was queued, so this goes back unattempted as well.
          if (!this.running) {
            await this.releaseAtShutdown(group, [...chunk, ...rest]);
            return;
          }
        }
        // Counted before it goes, so a crash never forgets what went out; what cannot be counted
        // does not go (it is due again at once, unattempted).
        if (plan) {
          try {
            await this.options.shaper!.recordWarmup(plan);
          } catch (err) {
            this.options.logger.error({ err, emailId: group.email.id }, 'recording warm-up usage failed; the deliveries go back to the queue unattempted');
            await this.options.deliveries.releaseGroups([{ ...group, deliveries: [...chunk, ...rest] }]).catch(() => undefined);
            return;
          }
        }
        const started = this.options.clock.now();
        const traces: AttemptTrace[] = [];
        const outcome = await this.attemptTargets(part, message, routed.targets, verdicts, traces, plan);
        if (outcome === 'not-attempted') {
          await this.releaseAtShutdown(group, [...chunk, ...rest]);
          return;
        }
        let done = part;
        let results = outcome.results;
        const deferral = outcome.noHost ? results.find((r) => r.outcome === 'deferred') : undefined;
        if (deferral && rest.length) {
          // No host took the transaction: the rest would meet the same hosts now, so they get
          // its deferral rather than each a round of timeouts (as when they shared it).
          results = [...results, ...rest.map((d) => ({ ...deferral, deliveryId: d.id }))];
          done = { ...group, deliveries: [...chunk, ...rest] };
          rest = [];
        }
        await this.record(done, outcome.reachedServer ? started : null, results, traces);
        this.ended(done.deliveries);
      }
    } finally {
      if (holdsMessage) this.signedMessages.release(group.email.id);
      if (verdicts.length) this.options.onTlsVerdicts?.(verdicts);
    }
  }

  /** Puts deliveries the shutdown stopped before they went back in the queue, unattempted. */
  private async releaseAtShutdown(group: DeliveryGroup, deliveries: DeliveryGroup['deliveries']): Promise<void> {
    try {
      await this.options.deliveries.releaseGroups([{ ...group, deliveries }]);
    } catch (err) {
      this.options.logger.error({ err, emailId: group.email.id }, 'releasing deliveries at shutdown failed; their leases run out instead');
    }
  }

  private async record(group: DeliveryGroup, started: Date | null, results: AttemptResult[], traces: AttemptTrace[]): Promise<void> {
    try {
      await this.options.deliveries.complete(group, started, results, traces, () => this.running);
    } catch (err) {
      // The lease expires and the deliveries are attempted again: at-least-once, never lost
      // (a write that lost its store connection was tried again first).
      this.options.logger.error({ err, emailId: group.email.id }, 'recording delivery results failed');
    }
  }

  /** Puts a group back unattempted until `until` (a hold, the rate, the warm-up budget), and wakes the engine then. */
  private async park(group: DeliveryGroup, until: number, reason: string): Promise<void> {
    try {
      await this.options.deliveries.parkGroups([group], until, reason);
    } catch (err) {
      this.options.logger.error({ err, emailId: group.email.id }, 'parking deliveries held by traffic shaping failed; their leases run out instead');
    }
    this.wakeSchedule.at(until);
  }

  /** Where the group goes: the hosts to try (and the primary MX, for the shaping rollup), or the outcome when there are none. */
  private async routeOf(group: DeliveryGroup, verdicts: TlsVerdict[]): Promise<{ targets: Target[]; mxHost: string | undefined } | { results: AttemptResult[] }> {
    const route = this.options.route;
    if (route) return { targets: [{ target: { host: route.host, address: route.address ?? route.host, port: route.port } }], mxHost: undefined };
    const domain = group.domain!;
    let planned: PlannedHost[];
    try {
      const hosts = await this.options.mx.resolve(group.rcptDomain);
      planned = this.options.transport ? await this.options.transport.plan(group.rcptDomain, hosts, domain.tlsPolicy) : hosts.map((host) => ({ host }) as PlannedHost);
    } catch (err) {
      if (err instanceof MxLookupError && err.permanent) {
        // No such domain, or a null MX (RFC 7505): the address can never receive mail.
        return { results: group.deliveries.map((d) => ({ deliveryId: d.id, outcome: 'bounced' as const, response: err.message, hardBounce: true, category: 'recipient' })) };
      }
      const what = err instanceof MxLookupError ? 'MX lookup' : 'transport security policy lookup';
      const response = `${what} for ${group.rcptDomain} failed: ${(err as Error).message}`;
      return { results: group.deliveries.map((d) => ({ deliveryId: d.id, outcome: 'deferred' as const, response, mxHost: null, ...(verdicts.length ? { tls: verdictSummary(verdicts.at(-1)!) } : {}) })) };
    }
    const targets = planned.flatMap((p) => p.host.addresses.map((address) => ({ target: { host: p.host.host, address, port: this.options.port }, ...(this.options.transport ? { planned: p } : {}) })));
    return { targets, mxHost: planned[0]?.host.host };
  }

  /**
   * One transaction's recipients' outcomes, whether a transaction began on a remote server and
   * whether no host took it (`noHost`: no session, or each failed it before any recipient's reply;
   * not when a reply suspended the source, whose other sources may still go), or 'not-attempted'
   * when the pool closed (shutdown) before a session.
   */
  private async attemptTargets(
    group: DeliveryGroup,
    message: Buffer,
    targets: Target[],
    verdicts: TlsVerdict[],
    traces: AttemptTrace[],
    plan: Extract<ShapingPlan, { kind: 'send' }> | undefined,
  ): Promise<{ results: AttemptResult[]; reachedServer: boolean; noHost?: boolean } | 'not-attempted'> {
    const domain = group.domain!;
    // Two rows of one email may name one mailbox (queued before domains were kept in A-labels,
    // one in each spelling, keyed alike on upgrade): it gets one RCPT TO, its reply ends both.
    const idsByRecipient = new Map<string, number[]>();
    for (const d of group.deliveries) idsByRecipient.set(d.recipient, [...(idsByRecipient.get(d.recipient) ?? []), d.id]);
    const recipients = [...idsByRecipient.keys()];
    // VERP return path (architecture.md, Decisions: return path): a DSN to it names the email and
    // this transaction's recipient (its recipient domain when it carries several) even if the
    // body is rewritten.
    const alone = recipients.length === 1 ? recipients[0] : undefined;
    const token = this.options.returnPathToken?.(group.email.id, group.rcptDomain, alone) ?? group.email.id;
    const mailFrom = `bounces+${token}@${domain.bounceLabel}.${domain.name}`;
    const source = plan?.source.name;
    const tlsOf = (v: TlsVerdict | undefined) => (v ? { tls: verdictSummary(v) } : {});
    const defer = (response: string, mxHost: string | null = null) =>
      group.deliveries.map((d) => ({ deliveryId: d.id, outcome: 'deferred' as const, response, mxHost, ...tlsOf(verdicts.at(-1)), ...(source ? { source } : {}) }));
    const fromTransaction = (res: TransactionResult, host: string): AttemptResult[] =>
      res.recipients.flatMap((r) => (idsByRecipient.get(r.recipient) ?? []).map((deliveryId) => ({
        deliveryId,
        outcome: r.outcome,
        code: r.code,
        response: r.response,
        mxHost: host,
        ...tlsOf(res.tls),
        hardBounce: r.hardBounce,
        retryAfterMs: r.retryAfterMs,
        ...(r.category ? { category: r.category } : {}),
        ...(source ? { source } : {}),
      })));
    const shaping = plan ? shapingOf(plan) : {};

    // A transaction that began on any host tried (even one that then failed the session) makes it SENT.
    let reachedServer = false;
    const errors: string[] = [];
    // A host its policy forbids is passed over without a connection: it takes no slot.
    let slots = this.maxTargets;
    const tried = targets.filter((t) => !!t.planned?.refused || slots-- > 0);
    const refusedHosts = new Set<string>();
    // The last host that failed after a session was up (421, a drop before any recipient's
    // reply): when no other host does better, its replies are the attempt's result.
    let hostFailure: { res: TransactionResult; host: string } | undefined;
    let suspended = false;
    for (const { target, planned } of tried) {
      const refused = planned?.refused;
      if (refused) {
        // Never connected to: MTA-STS enforce without a matching mx, or DANE that cannot be trusted.
        if (!refusedHosts.has(target.host)) {
          refusedHosts.add(target.host);
          errors.push(refused.message);
          verdicts.push(refused.verdict);
        }
        continue;
      }
      // Stopping: what has not reached the pool yet is not started now (stop() already let go
      // of the ones waiting in it).
      if (!this.running) return 'not-attempted';
      let res: TransactionResult;
      try {
        res = await this.options.pool.send(
          target,
          { mailFrom, recipients, message, tlsPolicy: domain.tlsPolicy, ...(planned ? { transport: planned.requirement } : {}), ...shaping },
          { email: group.email, domain },
        );
      } catch (err) {
        errors.push(`${target.host}[${target.address}]: ${(err as Error).message}`);
        continue;
      }
      if (res.notAttempted) return 'not-attempted';
      if (res.trace) traces.push({ ...res.trace, ...(source ? { sourceName: source } : {}), results: res.recipients.map((r) => ({ recipient: r.recipient, outcome: r.outcome, ...(r.code !== undefined ? { code: r.code } : {}), response: r.response })) });
      if (res.transactionStarted) reachedServer = true;
      if (res.tls) verdicts.push(res.tls);
      // A reply that a reply rule knows (a provider's "slow down") holds the (source, rollup).
      if (plan && (await this.observeReplies(plan, res))) suspended = true;
      if (!res.connected || res.hostFailure) {
        // RFC 5321 §5.1: a host that cannot take the message now means the next MX, not a wait.
        errors.push(`${target.host}[${target.address}]: ${res.error ?? res.recipients[0]?.response ?? 'no session'}`);
        if (res.hostFailure) hostFailure = { res, host: target.host };
        // The rollup is suspended: its other MX hosts are the same provider.
        if (suspended) break;
        continue;
      }
      return { results: fromTransaction(res, target.host), reachedServer };
    }
    const connectable = tried.filter((t) => !t.planned?.refused);
    const noHost = !suspended;
    // RFC 8461 §5.1: mail an enforce policy keeps out is not failed before a look for a new policy.
    if (verdicts.some((v) => v.policy.type === 'sts' && v.mode === 'enforce' && !v.proceeded)) this.options.transport?.stsRefused(group.rcptDomain);
    if (hostFailure && (connectable.length === 1 || suspended)) return { results: fromTransaction(hostFailure.res, hostFailure.host), reachedServer, noHost };
    // The event names the last host tried; the reply text names every one.
    const lastHost = tried.at(-1)?.target.host ?? null;
    const response = targets.length ? `no MX host took the message: ${errors.join('; ')}` : `no usable MX host for ${group.rcptDomain}`;
    return { results: defer(response, lastHost), reachedServer, noHost };
  }

  /** Tells the shaper the first reply that was not a success; true when it suspended the (source, rollup). */
  private async observeReplies(plan: Extract<ShapingPlan, { kind: 'send' }>, res: TransactionResult): Promise<boolean> {
    const reply = res.recipients.find((r) => r.outcome !== 'delivered' && r.code !== undefined);
    if (!reply) return false;
    try {
      const hold = await this.options.shaper!.observeReply(plan.source.name, plan.rollup, reply.code, reply.response);
      return hold?.kind === 'suspend';
    } catch (err) {
      this.options.logger.error({ err }, 'recording a traffic-shaping hold failed');
      return false;
    }
  }
}

type Target = { target: DeliveryTarget; planned?: PlannedHost };

/** The source and session limits a plan puts on the transaction request. */
function shapingOf(plan: Extract<ShapingPlan, { kind: 'send' }>): Pick<TransactionRequest, 'source' | 'shape'> {
  const { source, limits } = plan;
  const ref = { name: source.name, ehloName: source.ehloName, ...(source.localAddress ? { localAddress: source.localAddress } : {}) };
  const sessionLimits = limits.connectionLimit !== undefined || limits.maxDeliveriesPerConnection !== undefined || limits.idleTimeoutMs !== undefined;
  return {
    source: ref,
    ...(sessionLimits
      ? {
          shape: {
            key: `${source.name}\u0000${plan.rollup}`,
            ...(limits.connectionLimit !== undefined ? { connectionLimit: limits.connectionLimit } : {}),
            ...(limits.maxDeliveriesPerConnection !== undefined ? { maxDeliveriesPerConnection: limits.maxDeliveriesPerConnection } : {}),
            ...(limits.idleTimeoutMs !== undefined ? { idleTimeoutMs: limits.idleTimeoutMs } : {}),
          },
        }
      : {}),
  };
}
