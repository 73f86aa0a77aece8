import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { ClusterNodeRow, ClusterRepository, NodeBeat, SweepCounts } from '../../store/repositories/cluster-repository.js';

/*
 * The nodes of a cluster (architecture.md, Growing past one server; docs/scaling.md). Every node
 * writes a heartbeat to the shared store; a node silent for STALE_MS is dead, and the live ones
 * free what it held: its delivery and webhook call leases are claimable again at once (no wait
 * for the lease to run out), its campaign batch goes to another node, its in-flight idempotency
 * keys are released (its requests died with it), its connection counts stop counting, its
 * unfinished contact imports are taken up by a live node, and its bounce notice claims are
 * claimable again (the sweeping node claims them at once).
 *
 * A node stalled for longer than STALE_MS (a frozen VM) is taken for dead: what it was sending
 * may then be sent again by another node, as after a crash. The times are far above a
 * heartbeat's cost and far below a lease's length.
 */

export const HEARTBEAT_MS = 2000;
export const STALE_MS = 15_000;
/** Besides every change of the live set, the sweep runs at least this often (a safety net). */
const SWEEP_EVERY_MS = 30_000;
/** Three heartbeats: a node still running writes at least one meanwhile (a beat with a sweep takes longer). */
const TWIN_WATCH_MS = 3 * HEARTBEAT_MS;
/** Nodes silent this long are forgotten (they no longer show in the store). */
const FORGET_AFTER_MS = 24 * 3600_000;
/** The job_runs name of the repair of one node's death (period: `<node>@<its last heartbeat>`). */
export const NODE_DIED_RUN = 'node-died';
/** Cron runs are remembered this long (a run is claimed once; older claims matter no more). */
const KEEP_JOB_RUNS_MS = 7 * 24 * 3600_000;
/** A node's connection counts hold this long past its last heartbeat. */
const CONNECTION_COUNT_TTL_MS = STALE_MS;
/** A node clock this far off the store's is logged (cluster.clock_skew). */
const SKEW_WARN_MS = 2000;

export interface ClusterMember {
  node: string;
  hostname: string;
  pid: number;
  startedAt: string;
  lastSeenMs: number;
  listeners: Record<string, unknown>;
  self: boolean;
}

export interface ClusterServiceDeps {
  repo: ClusterRepository;
  clock: Clock;
  logger: Logger;
  node: { id: string; hostname: string; pid: number };
  /** Where this node listens, reported with each heartbeat. */
  listeners: () => Record<string, unknown>;
  /**
   * After every sweep: this node offers to take up the contact imports no node runs, those the
   * sweep freed and those another node freed but did not take up (it was stopping, or died).
   */
  onOrphanedImports?: () => Promise<unknown>;
  /** After every sweep: this node offers to carry on the cron runs nodes that are gone left unfinished. */
  onOrphanedRuns?: () => Promise<unknown>;
  /**
   * After a sweep that found a node newly dead, on the one node that claimed the repair of that
   * death for the cluster: a dead node's after-commit work (campaign counts) is redone from the
   * store. Not called for the nodes already dead when this one joined (its start repairs those).
   */
  onNodeDied?: () => Promise<unknown>;
  /**
   * After a sweep that freed bounce notice claims: this node claims them now (resolving once
   * claimed, not sent), not at the notice job's next look, up to 5 s later. Deliveries and
   * webhook calls need no such call: their loops look every second when idle.
   */
  onBounceNoticesFreed?: () => Promise<unknown>;
  /**
   * Runs the heartbeat's write with the SMTP sessions this node holds per destination, at a moment
   * no session is being counted in or out (connection-permits.ts).
   */
  writeConnections?: (write: (held: ReadonlyMap<string, number>) => Promise<void>) => Promise<void>;
  /**
   * At every heartbeat: how many nodes are live (this one included), so limits kept in each
   * node's memory that are meant for the cluster (webhook calls per endpoint and per host) are
   * cut to this node's share.
   */
  onLiveNodes?: (count: number) => void;
  /** Whether a process with this pid runs on this host (default: signal 0). */
  processAlive?: (pid: number) => boolean;
  /** This node's own clock (default Date.now; tests skew it). */
  wallClock?: () => number;
  /**
   * Another process took this node's name over while this one was silent for more than
   * STALE_MS (frozen, cut off): the beats have stopped, and the node must stop taking work and
   * exit, as a start refused its name would (NodeNameTaken).
   */
  onNameLost?: (err: NodeNameTaken) => void;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // it runs, as another user
  }
}

export class NodeNameTaken extends Error {}

export function createClusterService(deps: ClusterServiceDeps) {
  const { repo, clock, node } = deps;
  const wall = deps.wallClock ?? Date.now;
  const startedAt = clock.now().toISOString();
  let timer: NodeJS.Timeout | undefined;
  /** The last beat asked for; each waits for the one before, so beats never overlap (never rejects). */
  let beating: Promise<void> = Promise.resolve();
  let lastLive = '';
  let lastSweepMs = 0;
  /** The dead nodes (`<id>@<last heartbeat>`) the last sweep saw; undefined before the first. */
  let knownDead: Set<string> | undefined;
  let stopped = false;
  /**
   * Only a node that joined leaves. An admin command (`posthorn keys create`...) builds the app
   * from the same config, so under the same node name, and stops it without ever starting it:
   * leaving then would delete the live server's row, and the other nodes would take it for dead
   * at their next beat and send again what it is sending.
   */
  let joined = false;

  function total(c: SweepCounts): number {
    return c.deliveries + c.webhookCalls + c.campaignBatches + c.idempotencyKeys + c.connections + c.contactImports + c.bounceNotices;
  }

  function beatOf(): NodeBeat {
    return { id: node.id, hostname: node.hostname, pid: node.pid, startedAt, listenersJson: JSON.stringify(deps.listeners()) };
  }

  let skewed = false;
  /**
   * Logs once when this node's clock drifts from the store's by more than SKEW_WARN_MS (and once
   * when it is back): rate-limit windows, shaping slots and leases still compare node clocks.
   */
  function noteSkew(storeNow: number): void {
    const skew = wall() - storeNow;
    if (Math.abs(skew) > SKEW_WARN_MS === skewed) return;
    skewed = !skewed;
    if (skewed) deps.logger.warn({ event: 'cluster.clock_skew', skewMs: skew }, `this node's clock is ${skew} ms off the store's: keep the nodes' clocks in sync (NTP)`);
    else deps.logger.info({ event: 'cluster.clock_skew', skewMs: skew }, "this node's clock agrees with the store's again");
  }

  /** Runs a beat after the one under way; `sweep`: sweep even if the live set did not change. */
  function nextBeat(sweep = false): Promise<void> {
    const run = beating.then(() => {
      if (sweep) lastSweepMs = 0;
      return beat();
    });
    beating = run.catch(() => undefined);
    return run;
  }

  /**
   * The name's row is another process's now: beating on would share the name with it (its
   * leases, its session counts) undetected. No more beats, and this node is told to stop.
   */
  async function nameLost(): Promise<void> {
    stopped = true;
    joined = false; // its stop must not delete the new owner's row
    if (timer) clearTimeout(timer);
    const holder = await repo.nodeRow(node.id).catch(() => undefined);
    const by = holder ? ` by ${holder.hostname}, pid ${holder.pid}` : '';
    const err = new NodeNameTaken(
      `cluster.nodeName ${node.id} was taken over${by} while this node was silent for more than ${STALE_MS / 1000} s (frozen or cut off from the database), and its work was freed: this node stops; give every node its own name`,
    );
    deps.logger.error({ event: 'cluster.name_lost', node: node.id, holder: holder && { hostname: holder.hostname, pid: holder.pid } }, err.message);
    deps.onNameLost?.(err);
  }

  async function beat(): Promise<void> {
    // The store's time: every node judges heartbeats by the one clock.
    const now = await repo.heartbeat(beatOf());
    if (now === null) return nameLost();
    noteSkew(now);
    // Connection counts are stamped and judged by the store's clock too (acquireConnection).
    const writeCounts = (held: ReadonlyMap<string, number>) => repo.setConnections(node.id, held, CONNECTION_COUNT_TTL_MS);
    await (deps.writeConnections ? deps.writeConnections(writeCounts) : writeCounts(new Map()));
    const live = (await repo.members(now - STALE_MS)).map((m) => m.id);
    deps.onLiveNodes?.(live.length);
    const key = live.join('\n');
    if (key !== lastLive || now - lastSweepMs >= SWEEP_EVERY_MS) {
      const gone = lastLive ? lastLive.split('\n').filter((id) => !live.includes(id)) : [];
      // The sweep reads the live nodes again itself: one that joined since the read above is live.
      const { freed } = await repo.releaseDeadOwners(now - STALE_MS, node.id);
      // Only now: a sweep that failed (the store away, a row it could not have) is tried again at the next beat.
      lastLive = key;
      lastSweepMs = now;
      if (gone.length || total(freed)) deps.logger.info({ event: 'cluster.sweep', live, gone, freed }, `cluster: ${live.length} node(s) live${gone.length ? `, ${gone.join(', ')} gone` : ''}; freed what dead nodes held`);
      if (freed.bounceNotices) await deps.onBounceNoticesFreed?.();
      // Work that no node runs until one takes it up (the other kinds are claimed by the loops
      // that run anyway). Not only when this sweep freed some: a node that freed them may have
      // stopped or died before it took them up, and they are nobody's to free again.
      await deps.onOrphanedImports?.();
      await deps.onOrphanedRuns?.();
      await repairDeaths(now);
      await repo.forgetSilent(now - FORGET_AFTER_MS);
      // Runs are stamped by the clock the cron jobs run on, not the heartbeats' wall clock.
      await repo.pruneRuns(new Date(clock.nowMs() - KEEP_JOB_RUNS_MS).toISOString());
    }
  }

  /**
   * Deaths this node has not seen before (a node that left gracefully has no row, so is not
   * one): one node of the cluster claims each, and calls onNodeDied. Those seen at the first
   * sweep (this node joining) are the start's to repair.
   */
  async function repairDeaths(now: number): Promise<void> {
    const dead = (await repo.silentSince(now - STALE_MS)).map((d) => `${d.id}@${d.heartbeat_at}`);
    const fresh = knownDead ? dead.filter((d) => !knownDead!.has(d)) : [];
    let claimed = false;
    try {
      for (const death of fresh) if (await repo.claimRun(NODE_DIED_RUN, death, node.id, clock.now().toISOString())) claimed = true;
    } finally {
      // A claim won is this node's to repair, even if a later claim failed (that one is retried).
      if (claimed) await deps.onNodeDied?.();
    }
    knownDead = new Set(dead);
  }

  function schedule(): void {
    timer = setTimeout(() => {
      nextBeat()
        .catch((err: unknown) => deps.logger.warn({ event: 'cluster.heartbeat_failed', err: (err as Error).message }, 'cluster heartbeat failed; retried at the next beat'))
        .finally(() => {
          if (!stopped) schedule();
        });
    }, HEARTBEAT_MS);
    timer.unref();
  }

  return {
    nodeId: node.id,

    /**
     * Joins the cluster: refuses a name another live process uses (on another host, or running
     * on this one), frees what this node id held in an earlier life (a restart under the same
     * name) and what dead nodes held, then beats.
     */
    async start(): Promise<SweepCounts> {
      // The same name on this host under a pid that no longer runs is this node's earlier life,
      // killed a moment ago (a supervisor restarts it within seconds): not a clash.
      const free = (existing: ClusterNodeRow | undefined, now: number) =>
        !existing ||
        existing.heartbeat_at < now - STALE_MS ||
        (existing.hostname === node.hostname && existing.pid !== node.pid && !(deps.processAlive ?? processAlive)(existing.pid));
      let existing = await repo.join(beatOf(), free);
      if (existing && existing.hostname === node.hostname && existing.pid === node.pid) {
        // Same host and pid, heard lately: the earlier life of a container restarted a moment
        // ago (a container's first process is pid 1), or a twin container given the same host
        // name (so the same default name). Only the row's heartbeat tells them apart: a twin
        // still beats, an earlier life beats no more.
        const seen = existing.heartbeat_at;
        await new Promise((resolve) => setTimeout(resolve, TWIN_WATCH_MS));
        existing = await repo.join(beatOf(), (e, now) => !e || free(e, now) || (e.hostname === node.hostname && e.pid === node.pid && e.heartbeat_at === seen));
      }
      if (existing) {
        const now = await repo.now();
        throw new NodeNameTaken(
          `cluster.nodeName ${node.id} is in use by a live node (${existing.hostname}, pid ${existing.pid}, heard ${Math.round((now - existing.heartbeat_at) / 1000)} s ago): give every node its own name`,
        );
      }
      joined = true;
      const own = await repo.releaseOwn(node.id);
      await nextBeat();
      schedule();
      return own;
    },

    async stop(): Promise<void> {
      stopped = true;
      if (timer) clearTimeout(timer);
      await beating;
      if (!joined) return;
      await repo.leave({ ...node, startedAt }).catch((err: unknown) => deps.logger.warn({ err: (err as Error).message }, 'could not leave the cluster; the others will find this node dead'));
    },

    /** The nodes this one sees alive (itself included). */
    async members(): Promise<ClusterMember[]> {
      const now = await repo.now();
      const rows = await repo.members(now - STALE_MS);
      return rows.map((r) => ({
        node: r.id,
        hostname: r.hostname,
        pid: r.pid,
        startedAt: r.started_at,
        lastSeenMs: Math.max(0, now - r.heartbeat_at),
        listeners: JSON.parse(r.listeners_json) as Record<string, unknown>,
        self: r.id === node.id,
      }));
    },

    /** A heartbeat and a sweep now, not at the next beat (tests; an operator's nudge). */
    async sweepNow(): Promise<void> {
      if (stopped) return; // it has left, or is leaving (the beats asked for before run first)
      await nextBeat(true);
    },

    /** One run of a cron job for the whole cluster: true on the node that gets it. */
    async claimRun(job: string, period: string): Promise<boolean> {
      return repo.claimRun(job, period, node.id, clock.now().toISOString());
    },
  };
}
export type ClusterService = ReturnType<typeof createClusterService>;
