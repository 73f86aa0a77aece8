import { sql, type Expression, type ExpressionBuilder, type RawBuilder, type Selectable, type SqlBool } from 'kysely';
import type { Db } from '../db.js';
import { isPostgres, transact } from '../store-context.js';
import type { ClusterNodesTable } from '../tables/cluster-tables.js';
import type { Database } from '../tables/database.js';

/*
 * Several nodes sharing one store (architecture.md, Growing past one server): their heartbeats,
 * the sweep that frees what dead nodes held, cron runs claimed once per cluster, and
 * per-destination connection counts. Leases name their owner by the node id, or the node id
 * followed by ":" and a role (an operator's purge or bounce), so a node's liveness decides
 * whether its leases still stand.
 */

export type ClusterNodeRow = Selectable<ClusterNodesTable>;

export interface NodeBeat {
  id: string;
  hostname: string;
  pid: number;
  startedAt: string;
  listenersJson: string;
}

export interface SweepCounts {
  deliveries: number;
  webhookCalls: number;
  campaignBatches: number;
  idempotencyKeys: number;
  connections: number;
  contactImports: number;
  /** Bounce notice recipients (submission.bounceNotices) whose claim is freed. */
  bounceNotices: number;
}

/** `column` names no live node: not one of them, nor one of them followed by ":role". */
function ownedByNone<T extends keyof Database>(eb: ExpressionBuilder<Database, T>, column: string, live: readonly string[]): Expression<SqlBool> {
  const col = sql.ref(column);
  return eb.not(eb.or(live.flatMap((id) => [sql<SqlBool>`${col} = ${id}`, sql<SqlBool>`substr(${col}, 1, ${id.length + 1}) = ${`${id}:`}`])));
}

/** How long a refused node counts as waiting for a session (it asks again every 250 ms). */
const WAITING_MARK_MS = 1000;

/** The advisory lock of the sweep (exclusive) and of heartbeats (shared). */
const SWEEP_LOCK = 0x706f7374; // 'post'
/** How long the sweep waits for a row lock (heartbeats wait as long): far below STALE_MS. */
export const SWEEP_LOCK_WAIT_MS = 3000;

/**
 * The store's time in ms: heartbeats are stamped and judged by it, so a node whose clock is off
 * is neither taken for dead nor kept alive by its clock. (SQLite has one node and no heartbeats.)
 */
export function storeNowMs(db: Db): RawBuilder<number> {
  return isPostgres(db) ? sql<number>`(extract(epoch from clock_timestamp()) * 1000)::bigint` : sql<number>`${Date.now()}`;
}

/** The store's time in ms, read on `db` (a transaction's, inside one). */
async function readNowMs(db: Db): Promise<number> {
  return Number((await sql<{ now: number }>`select ${storeNowMs(db)} as now`.execute(db)).rows[0]!.now);
}

/**
 * Writes the node's heartbeat; returns its time (the store's). `own`: only over a row this very
 * process wrote (its host, pid and start time), or none; null when the name's row is another
 * process's, which took the name over while this one was silent (frozen, cut off).
 */
async function writeBeat(db: Db, node: NodeBeat, own: boolean): Promise<number | null> {
  const row = { hostname: node.hostname, pid: node.pid, started_at: node.startedAt, heartbeat_at: storeNowMs(db), listeners_json: node.listenersJson };
  const written = await db
    .insertInto('cluster_nodes')
    .values({ id: node.id, ...row })
    .onConflict((oc) => {
      const update = oc.column('id').doUpdateSet(row);
      return own
        ? update.where('cluster_nodes.hostname', '=', node.hostname).where('cluster_nodes.pid', '=', node.pid).where('cluster_nodes.started_at', '=', node.startedAt)
        : update;
    })
    .returning('heartbeat_at')
    .executeTakeFirst();
  return written ? Number(written.heartbeat_at) : null;
}

/** The tables whose rows a node claims with `lease_owner` and `lease_until`. */
type LeasedTable = 'deliveries' | 'webhook_calls' | 'bounce_notice_recipients';

/** Frees the leases in `table` held by nodes not in `live`; the rows stay due as they were. */
async function freeLeasesBut(db: Db, table: LeasedTable, live: readonly string[]): Promise<number> {
  // One of the three named for Kysely's types: each has the same two lease columns.
  const res = await db
    .updateTable(table as 'deliveries')
    .set({ lease_owner: null, lease_until: null })
    .where('lease_owner', 'is not', null)
    .where((eb) => ownedByNone(eb, 'lease_owner', live))
    .executeTakeFirst();
  return Number(res.numUpdatedRows);
}

/** Frees what nodes not in `live` hold (releaseDeadOwners). */
async function releaseOwnersBut(db: Db, live: readonly string[]): Promise<SweepCounts> {
  const deliveries = await freeLeasesBut(db, 'deliveries', live);
  const webhookCalls = await freeLeasesBut(db, 'webhook_calls', live);
  const campaignBatches = await db
    .updateTable('campaigns')
    .set({ batch_owner: null, batch_lease_until: null })
    .where('batch_owner', 'is not', null)
    .where((eb) => ownedByNone(eb, 'batch_owner', live))
    .executeTakeFirst();
  const idempotencyKeys = await db
    .deleteFrom('idempotency_keys')
    .where('state', '=', 'in_flight')
    .where('owner', 'is not', null)
    .where((eb) => ownedByNone(eb, 'owner', live))
    .executeTakeFirst();
  const connections = await db.deleteFrom('connection_leases').where('node', 'not in', live).executeTakeFirst();
  const contactImports = await db
    .updateTable('contact_imports')
    .set({ owner: null })
    .where('status', '=', 'RUNNING')
    .where('owner', 'is not', null)
    .where((eb) => ownedByNone(eb, 'owner', live))
    .executeTakeFirst();
  // Due as they were: a notice deferred by the sender's MX keeps its backoff.
  const bounceNotices = await freeLeasesBut(db, 'bounce_notice_recipients', live);
  return {
    deliveries,
    webhookCalls,
    campaignBatches: Number(campaignBatches.numUpdatedRows),
    idempotencyKeys: Number(idempotencyKeys.numDeletedRows),
    connections: Number(connections.numDeletedRows),
    contactImports: Number(contactImports.numUpdatedRows),
    bounceNotices,
  };
}

export function createClusterRepository(db: Db) {
  return {
    /** The store's time in ms (heartbeats are stamped with it). */
    async now(): Promise<number> {
      return readNowMs(db);
    },

    /**
     * Taken shared: a node that joins while a sweep runs is live for it, or joins after it
     * (releaseDeadOwners). Returns the heartbeat's time: the store's, against which the node
     * judges the others' heartbeats; null, and nothing written, when another process holds the
     * name's row now (it took the name over while this one was silent).
     */
    async heartbeat(node: NodeBeat): Promise<number | null> {
      return transact(db, async (trx) => {
        await sql`select pg_advisory_xact_lock_shared(${SWEEP_LOCK})`.execute(trx);
        return writeBeat(trx, node, true);
      });
    },

    /** The row that holds the name `id`, if any. */
    async nodeRow(id: string): Promise<ClusterNodeRow | undefined> {
      return db.selectFrom('cluster_nodes').selectAll().where('id', '=', id).executeTakeFirst();
    },

    /**
     * The first heartbeat of a node, if `free` says the name's row (if any) may be taken over
     * (told the store's time); else the row that holds the name, and nothing is written. Read
     * and write under a lock per name: two processes starting at once under one name would both
     * find it free.
     */
    async join(node: NodeBeat, free: (existing: ClusterNodeRow | undefined, nowMs: number) => boolean): Promise<ClusterNodeRow | undefined> {
      return transact(db, async (trx) => {
        await sql`select pg_advisory_xact_lock_shared(${SWEEP_LOCK})`.execute(trx);
        await sql`select pg_advisory_xact_lock(hashtext(${`node:${node.id}`}))`.execute(trx);
        const existing = await trx.selectFrom('cluster_nodes').selectAll().where('id', '=', node.id).executeTakeFirst();
        if (!free(existing, await readNowMs(trx))) return existing;
        await writeBeat(trx, node, false);
        return undefined;
      });
    },

    /** Nodes heard from since `sinceMs`, by id. */
    async members(sinceMs: number): Promise<ClusterNodeRow[]> {
      return db.selectFrom('cluster_nodes').selectAll().where('heartbeat_at', '>=', sinceMs).orderBy('id').execute();
    },

    /**
     * A node stopping gracefully leaves at once (its leases were released by its own stop, its
     * pool is closed): its sessions stop counting now, not at another node's next sweep, which
     * held that node back until then. Only its own row: a process that took the name over since
     * (a restart) keeps its membership and its sessions.
     */
    async leave(node: { id: string; hostname: string; pid: number; startedAt?: string }): Promise<void> {
      await transact(db, async (trx) => {
        let own = trx.deleteFrom('cluster_nodes').where('id', '=', node.id).where('hostname', '=', node.hostname).where('pid', '=', node.pid);
        if (node.startedAt) own = own.where('started_at', '=', node.startedAt);
        const left = await own.executeTakeFirst();
        if (Number(left.numDeletedRows)) await trx.deleteFrom('connection_leases').where('node', '=', node.id).execute();
      });
    },

    /** Nodes silent since `beforeMs` that did not leave: dead (killed, crashed, cut off), until forgotten. */
    async silentSince(beforeMs: number): Promise<{ id: string; heartbeat_at: number }[]> {
      return db.selectFrom('cluster_nodes').select(['id', 'heartbeat_at']).where('heartbeat_at', '<', beforeMs).orderBy('id').execute();
    },

    /** Forgets nodes silent since `beforeMs` (long dead: their leases were swept long ago). */
    async forgetSilent(beforeMs: number): Promise<number> {
      const res = await db.deleteFrom('cluster_nodes').where('heartbeat_at', '<', beforeMs).executeTakeFirst();
      return Number(res.numDeletedRows);
    },

    /**
     * Frees everything held by nodes not heard from since `sinceMs` (`self`, the sweeping node,
     * is live): delivery and webhook call leases (claimable again at once), campaign batch
     * leases, in-flight idempotency keys (the request died with its node, as on a restart),
     * connection counts, running contact imports (a live node takes them up) and bounce notice
     * claims (claimable again at once). The live nodes are read under a lock that heartbeats
     * take shared: with a list read before, a node that joined meanwhile and took work would
     * have it freed, and sent a second time.
     */
    async releaseDeadOwners(sinceMs: number, self: string): Promise<{ live: string[]; freed: SweepCounts }> {
      return transact(db, async (trx) => {
        await sql`select pg_advisory_xact_lock(${SWEEP_LOCK})`.execute(trx);
        // Every node's heartbeat waits while this runs: a row it cannot have (held by a node
        // frozen mid-transaction) ends the sweep, retried later, long before they look dead.
        await sql`set local lock_timeout = ${sql.lit(`${SWEEP_LOCK_WAIT_MS}ms`)}`.execute(trx);
        const live = (await trx.selectFrom('cluster_nodes').select('id').where('heartbeat_at', '>=', sinceMs).orderBy('id').execute()).map((r) => r.id);
        const freed = await releaseOwnersBut(trx, live.includes(self) ? live : [...live, self]);
        return { live, freed };
      });
    },

    /** Leases this very node id held in an earlier life (a restart under the same cluster.nodeName). */
    async releaseOwn(id: string): Promise<SweepCounts> {
      const mine = <T extends keyof Database>(eb: ExpressionBuilder<Database, T>, column: string) => eb.not(ownedByNone(eb, column, [id]));
      const deliveries = await db.updateTable('deliveries').set({ lease_owner: null, lease_until: null }).where('lease_owner', 'is not', null).where((eb) => mine(eb, 'lease_owner')).executeTakeFirst();
      const webhookCalls = await db.updateTable('webhook_calls').set({ lease_owner: null, lease_until: null }).where('lease_owner', 'is not', null).where((eb) => mine(eb, 'lease_owner')).executeTakeFirst();
      const campaignBatches = await db.updateTable('campaigns').set({ batch_owner: null, batch_lease_until: null }).where('batch_owner', 'is not', null).where((eb) => mine(eb, 'batch_owner')).executeTakeFirst();
      const idempotencyKeys = await db.deleteFrom('idempotency_keys').where('state', '=', 'in_flight').where('owner', 'is not', null).where((eb) => mine(eb, 'owner')).executeTakeFirst();
      const connections = await db.deleteFrom('connection_leases').where('node', '=', id).executeTakeFirst();
      // Its unfinished imports stay its own: this node takes them up again at start (resume).
      // Its bounce notice claims are freed by the bounce notice job's own start (releaseLeftBehind).
      return {
        deliveries: Number(deliveries.numUpdatedRows),
        webhookCalls: Number(webhookCalls.numUpdatedRows),
        campaignBatches: Number(campaignBatches.numUpdatedRows),
        idempotencyKeys: Number(idempotencyKeys.numDeletedRows),
        connections: Number(connections.numDeletedRows),
        contactImports: 0,
        bounceNotices: 0,
      };
    },

    /** Claims one run of a cron job for the cluster: true for the one node whose insert wins. */
    async claimRun(job: string, period: string, node: string, nowIso: string): Promise<boolean> {
      const res = await db.insertInto('job_runs').values({ job, period, node, started_at: nowIso }).onConflict((oc) => oc.columns(['job', 'period']).doNothing()).executeTakeFirst();
      return Number(res.numInsertedOrUpdatedRows ?? 0n) > 0;
    },

    async runsOf(job: string): Promise<{ period: string; node: string }[]> {
      return db.selectFrom('job_runs').select(['period', 'node']).where('job', '=', job).orderBy('period').execute();
    },

    async pruneRuns(beforeIso: string): Promise<number> {
      const res = await db.deleteFrom('job_runs').where('started_at', '<', beforeIso).executeTakeFirst();
      return Number(res.numDeletedRows);
    },

    /**
     * One more connection of `node` under `hostKey`, if the cluster's total stays within
     * `limit` and, while other nodes are waiting for one, this node stays within its fair share
     * (the limit divided among itself and them): a node that opened its sessions first does not
     * keep them all while the others' mail waits. A refused node is marked waiting for a moment
     * (it asks again sooner). Serialized per key by a transaction-scoped advisory lock, so two
     * nodes never both take the last one. Stamped and judged by the store's clock, as heartbeats
     * are: by a node's own, a node behind had its sessions run out at once for the others, and
     * they opened more than the limit. The count holds `ttlMs`, until a heartbeat renews it.
     */
    async acquireConnection(hostKey: string, node: string, limit: number, ttlMs: number): Promise<boolean> {
      return transact(db, async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtext(${`conn:${hostKey}`}))`.execute(trx);
        const nowMs = await readNowMs(trx);
        const untilMs = nowMs + ttlMs;
        const rows = await trx.selectFrom('connection_leases').select(['node', 'count', 'until_ms', 'waiting_until']).where('host_key', '=', hostKey).execute();
        let total = 0;
        let mine = 0;
        let othersWaiting = 0;
        for (const r of rows) {
          if (r.node === node) mine = Number(r.count);
          else if (r.waiting_until !== null && Number(r.waiting_until) > nowMs) othersWaiting++;
          if (r.node === node || Number(r.until_ms) > nowMs) total += Number(r.count);
        }
        const share = othersWaiting ? Math.max(1, Math.ceil(limit / (othersWaiting + 1))) : limit;
        if (total >= limit || mine >= share) {
          await trx
            .insertInto('connection_leases')
            .values({ host_key: hostKey, node, count: 0, until_ms: untilMs, waiting_until: nowMs + WAITING_MARK_MS })
            .onConflict((oc) => oc.columns(['host_key', 'node']).doUpdateSet({ waiting_until: nowMs + WAITING_MARK_MS }))
            .execute();
          return false;
        }
        await trx
          .insertInto('connection_leases')
          .values({ host_key: hostKey, node, count: 1, until_ms: untilMs, waiting_until: null })
          .onConflict((oc) => oc.columns(['host_key', 'node']).doUpdateSet({ count: sql`connection_leases.count + 1`, until_ms: untilMs, waiting_until: null }))
          .execute();
        return true;
      });
    },

    async releaseConnection(hostKey: string, node: string): Promise<void> {
      await db.updateTable('connection_leases').set({ count: sql`greatest(count - 1, 0)` }).where('host_key', '=', hostKey).where('node', '=', node).execute();
    },

    /**
     * The node is alive: its connection counts become exactly `held` (what its pool holds; this
     * also mends a count whose release was lost) and keep counting for `ttlMs` by the store's
     * clock (acquireConnection).
     */
    async setConnections(node: string, held: ReadonlyMap<string, number>, ttlMs: number): Promise<void> {
      const open = [...held].filter(([, n]) => n > 0);
      await transact(db, async (trx) => {
        const nowMs = await readNowMs(trx);
        const untilMs = nowMs + ttlMs;
        // Keys it holds nothing of go, unless it is waiting for one there.
        let gone = trx
          .deleteFrom('connection_leases')
          .where('node', '=', node)
          .where((eb) => eb.or([eb('waiting_until', 'is', null), eb('waiting_until', '<=', nowMs)]));
        if (open.length) gone = gone.where('host_key', 'not in', open.map(([k]) => k));
        await gone.execute();
        if (!open.length) return;
        await trx
          .insertInto('connection_leases')
          .values(open.map(([k, n]) => ({ host_key: k, node, count: n, until_ms: untilMs })))
          .onConflict((oc) => oc.columns(['host_key', 'node']).doUpdateSet({ count: sql`excluded.count`, until_ms: untilMs }))
          .execute();
      });
    },

    /** Open connections per destination, counted for the whole cluster. */
    async connectionsByDestination(): Promise<{ hostKey: string; count: number }[]> {
      const rows = await db
        .selectFrom('connection_leases')
        .select(['host_key', (eb) => eb.fn.sum<number>('count').as('n')])
        .where('until_ms', '>', storeNowMs(db))
        .groupBy('host_key')
        .orderBy('host_key')
        .execute();
      return rows.map((r) => ({ hostKey: r.host_key, count: Number(r.n) }));
    },
  };
}
export type ClusterRepository = ReturnType<typeof createClusterRepository>;
