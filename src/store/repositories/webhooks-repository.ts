import { sql, type Kysely, type Selectable } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { isPostgres, withDialect, transact } from '../store-context.js';
import { newId } from '../../lib/ids.js';
import type { Database, WebhookAttemptsTable, WebhooksTable, WebhookStatus } from '../tables/database.js';
import { boundedRead } from '../bounded-read.js';

export type WebhookRow = Selectable<WebhooksTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;

/** A claimed call with what the dispatcher needs to make the request. */
export interface ClaimedCall {
  id: number;
  webhookId: string;
  eventId: string;
  eventType: string;
  /** Attempts made before this one. */
  attempts: number;
  url: string;
  secret: string;
  body: string;
}

export interface NewWebhookEvent {
  id: string;
  teamId: number;
  type: string;
  domainId: number | null;
  body: string;
  createdAt: string;
}

export interface AttemptWrite {
  callId: number;
  owner: string;
  /** The call's state after this attempt. */
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  /** For a pending call: when to try again. */
  nextAttemptAt: number | null;
  attempt: Omit<WebhookAttemptsTable, 'id' | 'call_id' | 'discarded'>;
  /** A final failure that makes this many in a row auto-disables the endpoint; 0 never does. */
  disableAfterFailures: number;
}

/** What recording an attempt did. */
export interface AttemptRecorded {
  /** False when the call is gone or its lease was lost: nothing was written. */
  recorded: boolean;
  /** This attempt's final failure switched the endpoint to auto_disabled (and discarded its pending calls). */
  autoDisabled: boolean;
  /** The endpoint's consecutive final failures after this attempt. */
  consecutiveFailures: number;
}

export interface AttemptWithBody extends WebhookAttemptRow {
  body: string | null;
}

/** What the outbox writes for one event: the event and a call per chosen endpoint, due at dueMs. */
export interface OutboxWrite {
  event: NewWebhookEvent;
  webhookIds: string[];
  dueMs: number;
}

/** Chooses, from the team's endpoints (oldest first), where an event goes; null for nowhere. */
export type OutboxPick = (endpoints: WebhookRow[]) => OutboxWrite | null;

/** Discard entries are written this many at a time (SQLite's bound-parameter limit). */
const DISCARD_CHUNK = 500;

/**
 * Marks an endpoint's pending calls that nobody holds a live lease on as discarded (never sent),
 * if the endpoint is not active; test events are kept (an operator checks a paused endpoint with
 * one). The endpoint's status is read by the statement itself: no window between reading it and
 * acting on it. A call in flight is discarded at its next claim, if its attempt failed. Each
 * discarded call gets an entry in the attempts log (discarded = 1, `attempt` the one not made,
 * no request sent), in the same transaction, so the owner sees what was dropped.
 */
async function discardPending(db: Kysely<Database>, webhookId: string, nowMs: number, nowIso: string): Promise<number> {
  return transact(db, async (trx) => {
    // PostgreSQL: the endpoint's row first (FOR KEY SHARE, what the entries' foreign key check
    // takes anyway), then the calls': the order a recorder and a delete of the endpoint take them in.
    const endpoint = await trx
      .selectFrom('webhooks')
      .select(['url', 'status'])
      .where('id', '=', webhookId)
      .$if(isPostgres(db), (q) => q.forKeyShare())
      .executeTakeFirst();
    if (!endpoint || endpoint.status === 'active') return 0;
    const calls = await trx
      .updateTable('webhook_calls')
      .set({ state: 'discarded', lease_owner: null, lease_until: null, updated_at: nowIso })
      .where('webhook_id', '=', webhookId)
      .where('state', '=', 'pending')
      .where((w) => w.or([w('lease_until', 'is', null), w('lease_until', '<', nowMs)]))
      .where((w) => w.exists(w.selectFrom('webhooks').select('id').where('id', '=', webhookId).where('status', '!=', 'active')))
      .where((w) => w.not(w.exists(w.selectFrom('webhook_events as e').select('e.id').whereRef('e.id', '=', 'webhook_calls.event_id').where('e.type', '=', 'webhook.test'))))
      .returning(['id', 'event_id', 'attempts'])
      .execute();
    const error = `discarded: the endpoint is ${endpoint.status.toUpperCase()}; not sent`;
    for (let i = 0; i < calls.length; i += DISCARD_CHUNK) {
      const chunk = calls.slice(i, i + DISCARD_CHUNK);
      const types = await trx.selectFrom('webhook_events').select(['id', 'type']).where('id', 'in', [...new Set(chunk.map((c) => c.event_id))]).execute();
      const typeOf = new Map(types.map((e) => [e.id, e.type]));
      await trx
        .insertInto('webhook_attempts')
        .values(
          chunk.map((c) => ({
            call_id: c.id,
            public_id: newId('wa'),
            webhook_id: webhookId,
            event_id: c.event_id,
            event_type: typeOf.get(c.event_id) ?? 'webhook.test',
            attempt: c.attempts + 1,
            url: endpoint.url,
            request_headers_json: '{}',
            response_status: null,
            response_body: null,
            duration_ms: 0,
            error,
            succeeded: 0,
            discarded: 1,
            next_attempt_at: null,
            created_at: nowIso,
          })),
        )
        .execute();
    }
    return calls.length;
  });
}

export function createWebhooksRepository(db: Db) {
  // Outbox rows are written inside the emitter's own write transaction, which may be a
  // synchronous group-commit fn: so this one path uses prepared statements on the raw handle
  // (Kysely's SQLite driver is asynchronous). PostgreSQL queues them and writes them in the
  // transaction before its commit (store/pg/pg-outbox.ts).
  const sync = groupCommitOf(db);
  type Statements = ReturnType<typeof prepare>;
  const prepare = () => {
    const { sqlite } = sync;
    return {
      sqlite,
      listForTeam: sqlite.prepare<[number], WebhookRow>('select * from webhooks where team_id = ? order by created_at, id'),
      exists: sqlite.prepare<[string], { id: string }>('select id from webhooks where id = ?'),
      insertEvent: sqlite.prepare<[string, number, string, number | null, string, string]>(
        'insert into webhook_events (id, team_id, type, domain_id, body, created_at) values (?, ?, ?, ?, ?, ?)',
      ),
      insertCall: sqlite.prepare<[string, string, number, string, string]>(
        "insert into webhook_calls (webhook_id, event_id, state, attempts, next_attempt_at, created_at, updated_at) values (?, ?, 'pending', 0, ?, ?, ?)",
      ),
    };
  };
  let prepared: Statements | undefined;
  const stmts = () => (prepared ??= prepare());

  function insertOutboxRows(event: NewWebhookEvent, webhookIds: string[], dueMs: number): void {
    const s = stmts();
    s.insertEvent.run(event.id, event.teamId, event.type, event.domainId, event.body, event.createdAt);
    for (const id of webhookIds) s.insertCall.run(id, event.id, dueMs, event.createdAt, event.createdAt);
  }

  return withDialect(db, 'webhooks', {
    /**
     * The transactional outbox: `pick` chooses among the team's endpoints, and the event with
     * one call per chosen endpoint is written into the transaction the caller has open (the
     * write that changes the state this event reports), so both commit or neither does. No
     * transaction or savepoint of its own (no extra statements per event).
     */
    enqueueInOpenTransaction(teamId: number, pick: OutboxPick): void {
      const s = stmts();
      if (!s.sqlite.inTransaction) throw new Error('enqueueInOpenTransaction: no transaction is open');
      const write = pick(s.listForTeam.all(teamId));
      if (write) insertOutboxRows(write.event, write.webhookIds, write.dueMs);
    },

    /**
     * The same rows for one endpoint, in a (group-committed) transaction of their own: for an
     * event with no state change to ride on (a test event). False when the endpoint is gone.
     */
    async enqueueForOneEndpoint(event: NewWebhookEvent, webhookId: string, dueMs: number): Promise<boolean> {
      return sync.write(() => {
        if (!stmts().exists.get(webhookId)) return false;
        insertOutboxRows(event, [webhookId], dueMs);
        return true;
      });
    },

    /** Adds the endpoint unless its team already has maxPerTeam of them (false then). */
    async insert(row: WebhookRow, maxPerTeam: number): Promise<boolean> {
      return transact(db, async (trx) => {
        // The team's row first, so two creates on PostgreSQL count one after the other (NO KEY
        // UPDATE: the foreign key checks of the team's other writes do not wait for it). SQLite
        // runs one transaction at a time.
        if (isPostgres(db)) await trx.selectFrom('teams').select('id').where('id', '=', row.team_id).forNoKeyUpdate().execute();
        const r = await trx.selectFrom('webhooks').select((eb) => eb.fn.countAll<number>().as('n')).where('team_id', '=', row.team_id).executeTakeFirstOrThrow();
        if (Number(r.n) >= maxPerTeam) return false;
        await trx.insertInto('webhooks').values(row).execute();
        return true;
      });
    },

    async findById(teamId: number, id: string): Promise<WebhookRow | undefined> {
      return db.selectFrom('webhooks').selectAll().where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
    },

    /** onlyDomainIdsJson: restrict to endpoints whose domain list is exactly this (domain-bound keys). */
    async list(teamId: number, offset: number, limit: number, onlyDomainIdsJson?: string): Promise<{ rows: WebhookRow[]; total: number }> {
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('webhooks').where('team_id', '=', teamId);
        if (onlyDomainIdsJson !== undefined) q = q.where('domain_ids_json', '=', onlyDomainIdsJson);
        // One after the other: they share the read's connection.
        const rows = await q.selectAll().orderBy('created_at').orderBy('id').limit(limit).offset(offset).execute();
        const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        return { rows, total: Number(total.n) };
      });
    },

    /**
     * A change of status to paused then discards the endpoint's pending calls (discardPending;
     * `nowMs` tells which leases are live). Not in the same transaction: holding the endpoint's
     * row while waiting for a call's would deadlock with a recorder holding the call and waiting
     * for the endpoint's row. Nothing is sent in between: a claim takes only an active endpoint's calls.
     */
    async update(teamId: number, id: string, changes: Partial<Omit<WebhookRow, 'id' | 'team_id' | 'created_at' | 'disabled_at'>>, nowMs: number): Promise<WebhookRow | undefined> {
      const to = changes.status;
      // disabled_at follows the status in the same statement: set when it stops (kept if it was
      // already stopped that way: paused since the first pause), cleared when it is re-enabled.
      const disabledAt =
        to === undefined ? {} : { disabled_at: to === 'active' ? null : sql<string | null>`case when status = ${to} then disabled_at else ${changes.updated_at ?? new Date(nowMs).toISOString()} end` };
      const row = await db
        .updateTable('webhooks')
        .set({ ...changes, ...disabledAt })
        .where('team_id', '=', teamId)
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirst();
      if (row && changes.status !== undefined && changes.status !== 'active') await discardPending(db, row.id, nowMs, row.updated_at);
      return row;
    },

    /** Deletes the endpoint; its pending calls and recorded attempts go with it (cascade). */
    async remove(teamId: number, id: string): Promise<boolean> {
      const res = await db.deleteFrom('webhooks').where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
      return res.numDeletedRows > 0n;
    },

    /**
     * Claims up to `limit` due calls of one endpoint, oldest first, with a lease, in one
     * UPDATE ... RETURNING (architecture.md, House rules 6); an expired lease (its holder died) is claimable.
     */
    async claimForWebhook(webhookId: string, owner: string, nowMs: number, leaseMs: number, limit: number): Promise<ClaimedCall[]> {
      // A paused or auto-disabled endpoint's calls are discarded, not sent (test events excepted):
      // those that came due since it stopped, and those of events matched to it while it stopped.
      const endpoint = await db.selectFrom('webhooks').select('status').where('id', '=', webhookId).executeTakeFirst();
      if (endpoint && endpoint.status !== 'active') await discardPending(db, webhookId, nowMs, new Date(nowMs).toISOString());
      const claimed = await db
        .updateTable('webhook_calls')
        .set({ lease_owner: owner, lease_until: nowMs + leaseMs })
        .where('id', 'in', (eb) =>
          eb
            .selectFrom('webhook_calls')
            .select('id')
            .where('webhook_id', '=', webhookId)
            .where('state', '=', 'pending')
            .where('next_attempt_at', '<=', nowMs)
            .where((w) => w.or([w('lease_until', 'is', null), w('lease_until', '<', nowMs)]))
            // Checked by the claim itself too: an endpoint paused after the read above sends nothing more.
            .where((w) =>
              w.or([
                w.exists(w.selectFrom('webhooks').select('id').where('id', '=', webhookId).where('status', '=', 'active')),
                w.exists(w.selectFrom('webhook_events as e').select('e.id').whereRef('e.id', '=', 'webhook_calls.event_id').where('e.type', '=', 'webhook.test')),
              ]),
            )
            .orderBy('next_attempt_at')
            .orderBy('id')
            .limit(limit)
            // Nodes sharing a PostgreSQL store claim side by side: rows another is claiming are skipped, not waited for.
            .$if(isPostgres(db), (q) => q.forUpdate().skipLocked()),
        )
        .returning('id')
        .execute();
      if (!claimed.length) return [];
      const rows = await db
        .selectFrom('webhook_calls as c')
        .innerJoin('webhooks as w', 'w.id', 'c.webhook_id')
        .innerJoin('webhook_events as e', 'e.id', 'c.event_id')
        .select(['c.id', 'c.webhook_id', 'c.event_id', 'c.attempts', 'c.next_attempt_at', 'w.url', 'w.secret', 'e.type', 'e.body'])
        .where(
          'c.id',
          'in',
          claimed.map((r) => r.id),
        )
        .orderBy('c.next_attempt_at')
        .orderBy('c.id')
        .execute();
      return rows.map((r) => ({ id: r.id, webhookId: r.webhook_id, eventId: r.event_id, eventType: r.type, attempts: r.attempts, url: r.url, secret: r.secret, body: r.body }));
    },

    /** An endpoint's URL (the dispatcher's per-host cap), whatever its team; null when it is gone. */
    async urlOf(webhookId: string): Promise<string | null> {
      const row = await db.selectFrom('webhooks').select('url').where('id', '=', webhookId).executeTakeFirst();
      return row?.url ?? null;
    },

    /** Earliest due time of unleased pending calls per endpoint (a full scan: used rarely). */
    async dueByWebhook(nowMs: number): Promise<{ webhookId: string; dueAt: number }[]> {
      const rows = await db
        .selectFrom('webhook_calls')
        .select(['webhook_id', (eb) => eb.fn.min<number>('next_attempt_at').as('due')])
        .where('state', '=', 'pending')
        .where((w) => w.or([w('lease_until', 'is', null), w('lease_until', '<', nowMs)]))
        .groupBy('webhook_id')
        .execute();
      return rows.map((r) => ({ webhookId: r.webhook_id, dueAt: Number(r.due) }));
    },

    /** Earliest due time of one endpoint's unleased pending calls (index range scan). */
    async nextDueForWebhook(webhookId: string, nowMs: number): Promise<number | null> {
      const r = await db
        .selectFrom('webhook_calls')
        .select((eb) => eb.fn.min<number>('next_attempt_at').as('due'))
        .where('webhook_id', '=', webhookId)
        .where('state', '=', 'pending')
        .where((w) => w.or([w('lease_until', 'is', null), w('lease_until', '<', nowMs)]))
        .executeTakeFirst();
      return r?.due === null || r?.due === undefined ? null : Number(r.due);
    },

    /**
     * Records one attempt and moves the call on, in one transaction. Only the lease holder
     * may write: if the call is gone (endpoint deleted) or the lease was lost, nothing is recorded.
     */
    async recordAttempt(w: AttemptWrite, nowIso: string): Promise<AttemptRecorded> {
      const none: AttemptRecorded = { recorded: false, autoDisabled: false, consecutiveFailures: 0 };
      const result = await transact(db, async (trx): Promise<AttemptRecorded> => {
        // PostgreSQL: the endpoint's row first (FOR KEY SHARE, what the attempt's foreign key
        // check takes anyway), then the call's: the order a delete of the endpoint takes them
        // in. The other order deadlocked with such a delete, which failed. SQLite runs one
        // transaction at a time.
        if (isPostgres(db) && !(await trx.selectFrom('webhooks').select('id').where('id', '=', w.attempt.webhook_id).forKeyShare().executeTakeFirst())) return none;
        const updated = await trx
          .updateTable('webhook_calls')
          .set({
            state: w.state,
            attempts: w.attempts,
            ...(w.nextAttemptAt !== null ? { next_attempt_at: w.nextAttemptAt } : {}),
            lease_owner: null,
            lease_until: null,
            updated_at: nowIso,
          })
          .where('id', '=', w.callId)
          .where('lease_owner', '=', w.owner)
          .returning('id')
          .executeTakeFirst();
        if (!updated) return none;
        await trx
          .insertInto('webhook_attempts')
          .values({ call_id: w.callId, ...w.attempt })
          .execute();
        const webhookId = w.attempt.webhook_id;
        if (w.state === 'delivered') {
          // Written only when there is something to reset: most deliveries change nothing here.
          await trx.updateTable('webhooks').set({ consecutive_failures: 0 }).where('id', '=', webhookId).where('consecutive_failures', '!=', 0).execute();
          return { recorded: true, autoDisabled: false, consecutiveFailures: 0 };
        }
        if (w.state !== 'failed') return { ...none, recorded: true };
        // Counted and switched by one statement (nodes record side by side: no read-modify-write).
        // Only an active endpoint counts, so the row this returns as auto_disabled is the switch.
        const threshold = w.disableAfterFailures;
        const row = await trx
          .updateTable('webhooks')
          .set((eb) => ({
            consecutive_failures: eb('consecutive_failures', '+', 1),
            status: threshold > 0 ? sql<WebhookStatus>`case when consecutive_failures + 1 >= ${threshold} then 'auto_disabled' else status end` : eb.ref('status'),
            disabled_at: threshold > 0 ? sql<string | null>`case when consecutive_failures + 1 >= ${threshold} then ${nowIso} else disabled_at end` : eb.ref('disabled_at'),
          }))
          .where('id', '=', webhookId)
          .where('status', '=', 'active')
          .returning(['status', 'consecutive_failures'])
          .executeTakeFirst();
        return { recorded: true, autoDisabled: row?.status === 'auto_disabled', consecutiveFailures: row ? Number(row.consecutive_failures) : 0 };
      });
      // After the commit, as a pause does (update above). Should this fail, the calls are
      // discarded at their claim instead: the attempt itself is recorded.
      if (result.autoDisabled) await discardPending(db, w.attempt.webhook_id, Date.parse(nowIso), nowIso).catch(() => 0);
      return result;
    },

    /** On start with SQLite (one node per database file): every lease belonged to a dead process. */
    async releaseAllLeases(): Promise<number> {
      const res = await db.updateTable('webhook_calls').set({ lease_owner: null, lease_until: null }).where('lease_owner', 'is not', null).executeTakeFirst();
      return Number(res.numUpdatedRows);
    },

    /**
     * Newest first; `beforeId` is the cursor (the last id of the previous page). The page ends
     * early once the bodies it shows would pass `maxBodyChars` (it always has one attempt):
     * an event's body may be megabytes, and each of its attempts shows it. The bodies
     * are read after the page is cut, once per event. `more`: attempts follow this page.
     */
    async listAttempts(webhookId: string, limit: number, beforeId?: number, maxBodyChars = Infinity): Promise<{ attempts: AttemptWithBody[]; more: boolean }> {
      return boundedRead(db, async (rdb) => {
        let q = rdb
          .selectFrom('webhook_attempts as a')
          .leftJoin('webhook_events as e', 'e.id', 'a.event_id')
          .selectAll('a')
          .select(sql<number | null>`length(e.body)`.as('body_chars'))
          .where('a.webhook_id', '=', webhookId);
        if (beforeId !== undefined) q = q.where('a.id', '<', beforeId);
        const rows = await q.orderBy('a.id', 'desc').limit(limit + 1).execute();
        const page: WebhookAttemptRow[] = [];
        let chars = 0;
        for (const { body_chars, ...row } of rows.slice(0, limit)) {
          const n = Number(body_chars ?? 0);
          if (page.length && chars + n > maxBodyChars) break;
          page.push(row);
          chars += n;
        }
        const eventIds = [...new Set(page.map((r) => r.event_id))];
        const events = eventIds.length ? await rdb.selectFrom('webhook_events').select(['id', 'body']).where('id', 'in', eventIds).execute() : [];
        const bodies = new Map(events.map((e) => [e.id, e.body]));
        return { attempts: page.map((r) => ({ ...r, body: bodies.get(r.event_id) ?? null })), more: rows.length > page.length };
      });
    },

    /** The newest HTTP attempt's outcome and time only (a discard entry is none): no event body (it may be megabytes) and no response body. */
    async lastAttemptOutcome(webhookId: string): Promise<Pick<WebhookAttemptRow, 'succeeded' | 'response_status' | 'error' | 'created_at'> | undefined> {
      return db
        .selectFrom('webhook_attempts')
        .select(['succeeded', 'response_status', 'error', 'created_at'])
        .where('webhook_id', '=', webhookId)
        .where('discarded', '=', 0)
        .orderBy('id', 'desc')
        .limit(1)
        .executeTakeFirst();
    },

    /** Retention: finished calls, their attempts and unreferenced events older than the cut-off. */
    async prune(beforeIso: string): Promise<number> {
      return transact(db, async (trx) => {
        const attempts = await trx.deleteFrom('webhook_attempts').where('created_at', '<', beforeIso).executeTakeFirst();
        await trx.deleteFrom('webhook_calls').where('state', '!=', 'pending').where('updated_at', '<', beforeIso).execute();
        await trx
          .deleteFrom('webhook_events')
          .where('created_at', '<', beforeIso)
          .where(({ not, exists, selectFrom }) => not(exists(selectFrom('webhook_calls').select('id').whereRef('webhook_calls.event_id', '=', 'webhook_events.id'))))
          .execute();
        return Number(attempts.numDeletedRows);
      });
    },
  });
}
export type WebhooksRepository = ReturnType<typeof createWebhooksRepository>;
