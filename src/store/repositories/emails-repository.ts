import { sql, type Selectable, type SelectQueryBuilder, type Transaction } from 'kysely';
import type BetterSqlite3 from 'better-sqlite3';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { storedBytes, withinBytes, type ChunkLimit } from './content-chunks.js';
import { transact, withDialect } from '../store-context.js';
import { RecipientGoneError } from '../store-errors.js';
import type { Database, DeliveriesTable, EmailsTable } from '../tables/database.js';
import { boundedRead } from '../bounded-read.js';

export type EmailRow = Selectable<EmailsTable>;

export interface NewDelivery {
  recipient: string;
  rcptDomain: string;
  kind: 'to' | 'cc' | 'bcc';
  /** Initial state: queued normally, cancelled never; suppressed emails get no deliveries. */
  nextAttemptAt: number;
}

export interface NewEvent {
  status: string;
  data: unknown;
  createdAt: string;
}

export interface NewEmail {
  row: EmailsTable;
  /** A campaign message: its (campaign, contact) row is written in the same transaction, and
   *  an existing row makes the insert fail, so no contact ever gets a campaign twice. */
  campaignRecipient?: { campaignId: string; contactId: string };
  tags: string[];
  deliveries: NewDelivery[];
  events: NewEvent[];
}

export interface IdempotencyCompletion {
  teamId: number;
  key: string;
  responseJson: string;
}

export interface EmailListFilter {
  teamId: number;
  domainIds?: number[];
  startDate?: string;
  endDate?: string;
  tags?: string[];
  offset: number;
  limit: number;
}

export interface EmailEventRow {
  emailId: string;
  status: string;
  createdAt: string;
  data: unknown;
}

type Executor = Db | Transaction<Database>;

/** Appends one status event and moves latestStatus forward only (by rank). */
export async function insertEventAndBump(trx: Executor, e: { emailId: string; status: string; rank: number; data: unknown; at: string }): Promise<void> {
  await trx
    .insertInto('email_events')
    .values({ email_id: e.emailId, status: e.status, data_json: e.data === undefined || e.data === null ? null : JSON.stringify(e.data), created_at: e.at })
    .execute();
  await trx.updateTable('emails').set({ latest_status: e.status, status_rank: e.rank, updated_at: e.at }).where('id', '=', e.emailId).where('status_rank', '<', e.rank).execute();
}

export const EMAIL_COLUMNS = [
  'id', 'team_id', 'domain_id', 'api_key_id', 'from_addr', 'to_json', 'cc_json', 'bcc_json', 'reply_to_json', 'subject',
  'text_body', 'html_body', 'headers_json', 'attachments_json', 'tags_json', 'template_id', 'campaign_id', 'contact_id',
  'in_reply_to', 'references_json', 'message_id', 'scheduled_at', 'open_tracking', 'click_tracking', 'submitted_by', 'accepted_in_sandbox', 'latest_status', 'status_rank', 'sent_at',
  'created_at', 'updated_at',
] as const satisfies readonly (keyof EmailsTable)[];
/**
 * The body of an email: its content, by far the largest part of the row (attachments can be tens
 * of megabytes). The delivery engine claims the rest (EmailHead) and reads the body only when it
 * composes the message, within its memory budget (architecture.md, A delivery attempt).
 */
export const EMAIL_BODY_COLUMNS = ['text_body', 'html_body', 'attachments_json'] as const;
export type EmailBody = Pick<EmailRow, (typeof EMAIL_BODY_COLUMNS)[number]>;
/** An email without its body, and the body's size in bytes (UTF-8), read without reading the body. */
export type EmailHead = Omit<EmailRow, keyof EmailBody> & { body_bytes: number };
export const EMAIL_HEAD_COLUMNS = EMAIL_COLUMNS.filter((c): c is Exclude<(typeof EMAIL_COLUMNS)[number], keyof EmailBody> => !(EMAIL_BODY_COLUMNS as readonly string[]).includes(c));
/** octet_length() gives a value's size from the record header, without loading the value (SQLite and PostgreSQL alike). */
export const BODY_BYTES_SQL = EMAIL_BODY_COLUMNS.map((c) => `coalesce(octet_length(${c}), 0)`).join(' + ');
const SELECT_HEAD_SQL = `select ${EMAIL_HEAD_COLUMNS.join(', ')}, ${BODY_BYTES_SQL} as body_bytes from emails where id = ?`;
const SELECT_BODY_SQL = `select ${EMAIL_BODY_COLUMNS.join(', ')} from emails where id = ?`;
/**
 * A campaign's (campaign, contact) row, written only while the contact is subscribed and its
 * address not suppressed (as the campaign's audience is read); params: campaign, contact,
 * email, contact, team.
 */
const RECIPIENT_STILL_SUBSCRIBED_SQL = `exists (select 1 from contacts c where c.id = ? and c.team_id = ? and c.subscribed = 1
  and not exists (select 1 from suppressions s where s.team_id = c.team_id and s.email = c.email))`;
const INSERT_RECIPIENT_IF_SUBSCRIBED_SQL = `insert into campaign_recipients (campaign_id, contact_id, email_id) select ?, ?, ? where ${RECIPIENT_STILL_SUBSCRIBED_SQL}`;
const INSERT_EMAIL_SQL = `insert into emails (${EMAIL_COLUMNS.join(', ')}) values (${EMAIL_COLUMNS.map(() => '?').join(', ')})`;

/**
 * A scheduled email whose time has come stays SCHEDULED until its first attempt is recorded
 * (SENT): while the engine holds a lease on one of its deliveries the message may already be on
 * the wire, so it can no longer be cancelled or moved (the attempt would record DELIVERED after
 * a 200 to the cancel).
 */
const notBeingAttempted = sql<boolean>`not exists (select 1 from deliveries where deliveries.email_id = emails.id and deliveries.lease_owner is not null)`;

/** A delivery of the email was claimed for an attempt after the email's own check (see below). */
class ClaimedMeanwhile extends Error {}
const falseIfClaimed = (err: unknown): false => {
  if (err instanceof ClaimedMeanwhile) return false;
  throw err;
};

/**
 * On PostgreSQL (READ COMMITTED, each statement its own snapshot) a node may claim one of the
 * email's deliveries between the check on the email and the update of its deliveries: that
 * update skips leased rows, and this undoes the whole change, so the attempt under way is
 * neither cancelled under the engine's feet (sent while the API said CANCELLED) nor moved.
 * SQLite runs one writer at a time: nothing is ever found here.
 */
async function refuseIfClaimedMeanwhile(trx: Executor, emailId: string): Promise<void> {
  const leased = await trx.selectFrom('deliveries').select('id').where('email_id', '=', emailId).where('state', '=', 'queued').where('lease_owner', 'is not', null).executeTakeFirst();
  if (leased) throw new ClaimedMeanwhile();
}

type ContentScan = SelectQueryBuilder<Database, 'emails', { id: string; bytes: number }>;

/** An accepted email's rows (campaign recipient, email, tags, deliveries, first events), by synchronous statements in the open transaction. */
function writeAccepted(sqlite: BetterSqlite3.Database, items: NewEmail[]): void {
  for (const item of items) {
    const r = item.row;
    if (item.campaignRecipient) {
      // Only while the contact is still to be mailed, checked in this transaction: an
      // unsubscribe committed after the audience was read is honoured (no row, no email).
      const { campaignId, contactId } = item.campaignRecipient;
      const written = sqlite.prepare(INSERT_RECIPIENT_IF_SUBSCRIBED_SQL).run(campaignId, contactId, r.id, contactId, r.team_id).changes;
      if (written === 0) throw new RecipientGoneError(contactId);
    }
    sqlite.prepare(INSERT_EMAIL_SQL).run(EMAIL_COLUMNS.map((c) => r[c]));
    for (const tag of item.tags) sqlite.prepare('insert into email_tags (email_id, team_id, tag) values (?, ?, ?)').run(r.id, r.team_id, tag);
    const acceptedAt = Date.parse(r.created_at);
    // The give-up age counts from the time a delivery is due (a scheduled send's time).
    for (const d of item.deliveries) {
      sqlite
        .prepare(
          `insert into deliveries (email_id, team_id, recipient, rcpt_domain, kind, state, attempts, next_attempt_at, due_since, updated_at)
           values (?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?)`,
        )
        .run(r.id, r.team_id, d.recipient, d.rcptDomain, d.kind, d.nextAttemptAt, Math.max(acceptedAt, d.nextAttemptAt), r.created_at);
    }
    for (const e of item.events) {
      sqlite
        .prepare('insert into email_events (email_id, status, data_json, created_at) values (?, ?, ?, ?)')
        .run(r.id, e.status, e.data === undefined || e.data === null ? null : JSON.stringify(e.data), e.createdAt);
    }
  }
}

export function createEmailsRepository(db: Db) {
  const sync = groupCommitOf(db);
  /** Content retention's scans: ids after `afterId`, in order, of emails that still have content, narrowed by `narrow`, within `limit`. */
  const idsWithContent = async (afterId: string, limit: ChunkLimit, narrow: (q: ContentScan) => ContentScan): Promise<string[]> => {
    const q = db
      .selectFrom('emails')
      .select(['id', storedBytes(...EMAIL_BODY_COLUMNS).as('bytes')])
      .where('id', '>', afterId)
      .where((eb) => eb.or(EMAIL_BODY_COLUMNS.map((c) => eb(c, 'is not', null))));
    const rows = await narrow(q).orderBy('id').limit(limit.rows).execute();
    return withinBytes(rows, limit.bytes).map((r) => r.id);
  };
  return withDialect(db, 'emails', {
    /**
     * Stores accepted emails with their tags, per-recipient deliveries and first events in
     * one transaction, and completes the idempotency entry in the same transaction, so a
     * crash leaves either everything or nothing. `inTransaction` runs last inside the same
     * transaction (the transactional outbox); it may run more than once, like the write.
     */
    async insertAccepted(items: NewEmail[], idem?: IdempotencyCompletion, inTransaction?: () => void): Promise<void> {
      const { sqlite } = sync;
      await sync.write(() => {
        writeAccepted(sqlite, items);
        if (idem) {
          sqlite.prepare(`update idempotency_keys set state = 'done', response_json = ? where team_id = ? and key = ?`).run(idem.responseJson, idem.teamId, idem.key);
        }
        inTransaction?.();
      });
    },

    /**
     * The same rows inside the write transaction the caller has open (a double opt-in
     * confirmation in its contact's transaction): they commit with the caller's change or not at
     * all, and a failure here fails that transaction. Throws outside a transaction.
     */
    insertAcceptedInOpenTransaction(items: NewEmail[]): void {
      if (!sync.sqlite.inTransaction) throw new Error('insertAcceptedInOpenTransaction: no transaction is open');
      writeAccepted(sync.sqlite, items);
    },

    /** Hot path: one email without its body, by id, any team (the engine's claim). */
    async findHeadAnyTeamFast(id: string): Promise<EmailHead | undefined> {
      return sync.read(() => sync.sqlite.prepare(SELECT_HEAD_SQL).get(id) as EmailHead | undefined);
    },
    /** The body of one email, any team (the engine, when it composes the message). */
    async findBodyAnyTeamFast(id: string): Promise<EmailBody | undefined> {
      return sync.read(() => sync.sqlite.prepare(SELECT_BODY_SQL).get(id) as EmailBody | undefined);
    },

    async findById(teamId: number, id: string): Promise<EmailRow | undefined> {
      return db.selectFrom('emails').selectAll().where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
    },

    async findByIdAnyTeam(id: string): Promise<EmailRow | undefined> {
      return db.selectFrom('emails').selectAll().where('id', '=', id).executeTakeFirst();
    },

    /** For VERP tokens an MTA lowercased on the way back (indexed on lower(id) by the inbound migration). */
    async findByIdIgnoringCase(id: string): Promise<EmailRow | undefined> {
      return db
        .selectFrom('emails')
        .selectAll()
        .where(sql<string>`lower(id)`, '=', id.toLowerCase())
        .executeTakeFirst();
    },

    async findByMessageId(messageId: string): Promise<EmailRow | undefined> {
      return db.selectFrom('emails').selectAll().where('message_id', '=', messageId).executeTakeFirst();
    },

    async events(emailId: string): Promise<EmailEventRow[]> {
      const rows = await db.selectFrom('email_events').select(['email_id', 'status', 'created_at', 'data_json']).where('email_id', '=', emailId).orderBy('id').execute();
      return rows.map((r) => ({ emailId: r.email_id, status: r.status, createdAt: r.created_at, data: r.data_json === null ? null : JSON.parse(r.data_json) }));
    },

    /**
     * One page of the list: the ids in order with their body sizes (characters of html + text),
     * not the rows, so a caller can decide how to fetch rows whose bodies may be tens of MB.
     */
    async listPage(f: EmailListFilter): Promise<{ page: { id: string; bodyChars: number }[]; count: number }> {
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('emails').where('team_id', '=', f.teamId);
        // An empty list matches nothing (never every row, never `in ()`).
        if (f.domainIds) q = q.where('domain_id', 'in', f.domainIds.length ? f.domainIds : [-1]);
        if (f.startDate) q = q.where('created_at', '>=', f.startDate);
        if (f.endDate) q = q.where('created_at', '<=', f.endDate);
        if (f.tags?.length === 0) q = q.where(sql<boolean>`false`);
        if (f.tags?.length) {
          const tags = [...new Set(f.tags)];
          // AND semantics: the email carries every requested tag.
          q = q.where('id', 'in', (eb) =>
            eb
              .selectFrom('email_tags')
              .select('email_id')
              .where('team_id', '=', f.teamId)
              .where('tag', 'in', tags)
              .groupBy('email_id')
              .having(sql<number>`count(distinct tag)`, '=', tags.length),
          );
        }
        // One after the other: they share the read's connection.
        const page = await q
          .select(['id', sql<number>`coalesce(length(html_body), 0) + coalesce(length(text_body), 0)`.as('bodyChars')])
          .orderBy('created_at', 'desc')
          .orderBy('id', 'desc')
          .limit(f.limit)
          .offset(f.offset)
          .execute();
        const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        return { page: page.map((r) => ({ id: r.id, bodyChars: Number(r.bodyChars) })), count: Number(total.n) };
      });
    },

    /** Rows of one team by id, in the order of `ids` (missing ones left out). */
    async findManyById(teamId: number, ids: string[]): Promise<EmailRow[]> {
      if (!ids.length) return [];
      const rows = await db.selectFrom('emails').selectAll().where('team_id', '=', teamId).where('id', 'in', ids).execute();
      const byId = new Map(rows.map((r) => [r.id, r]));
      return ids.flatMap((id) => byId.get(id) ?? []);
    },

    /**
     * Appends events and moves latestStatus forward only (by rank), in one transaction;
     * `inTransaction` runs synchronously inside it, last (the transactional outbox).
     */
    async recordEvents(items: { emailId: string; status: string; rank: number; data: unknown; at: string }[], inTransaction?: () => void): Promise<void> {
      if (!items.length) return;
      await transact(db, async (trx) => {
        for (const e of items) await insertEventAndBump(trx, e);
        inTransaction?.();
      });
    },

    /**
     * Marks the email SENT the first time an attempt starts. Returns the ids that were newly
     * marked, so SENT is recorded once per email however many recipients it has.
     */
    async markSent(emailIds: string[], at: string, sentRank: number): Promise<string[]> {
      if (!emailIds.length) return [];
      const rows = await transact(db, async (trx) => {
        const updated = await trx
          .updateTable('emails')
          .set({ sent_at: at, updated_at: at })
          .where('id', 'in', emailIds)
          .where('sent_at', 'is', null)
          .returning('id')
          .execute();
        for (const r of updated) {
          await trx.insertInto('email_events').values({ email_id: r.id, status: 'SENT', data_json: null, created_at: at }).execute();
          await trx.updateTable('emails').set({ latest_status: 'SENT', status_rank: sentRank }).where('id', '=', r.id).where('status_rank', '<', sentRank).execute();
        }
        return updated;
      });
      return rows.map((r) => r.id);
    },

    /**
     * Reschedules only while SCHEDULED and not being attempted (checked in the same statement); the
     * history gains a SCHEDULED event naming the new time and the one it replaced.
     */
    async reschedule(teamId: number, id: string, scheduledAt: string, dueMs: number, nowIso: string): Promise<boolean> {
      return transact(db, async (trx) => {
        const previous = (await trx.selectFrom('emails').select('scheduled_at').where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst())?.scheduled_at;
        const res = await trx
          .updateTable('emails')
          .set({ scheduled_at: scheduledAt, updated_at: nowIso })
          .where('team_id', '=', teamId)
          .where('id', '=', id)
          .where('latest_status', '=', 'SCHEDULED')
          .where(notBeingAttempted)
          .executeTakeFirst();
        if (res.numUpdatedRows === 0n) return false;
        await trx.updateTable('deliveries').set({ next_attempt_at: dueMs, due_since: dueMs, updated_at: nowIso }).where('email_id', '=', id).where('state', '=', 'queued').where('lease_owner', 'is', null).execute();
        await trx
          .insertInto('email_events')
          .values({ email_id: id, status: 'SCHEDULED', data_json: JSON.stringify({ scheduledAt, ...(previous ? { rescheduledFrom: previous } : {}) }), created_at: nowIso })
          .execute();
        await refuseIfClaimedMeanwhile(trx, id);
        return true;
      }).catch(falseIfClaimed);
    },

    /**
     * Cancels only while SCHEDULED and not being attempted: the email becomes CANCELLED and its
     * deliveries never run.
     * `inTransaction` runs synchronously inside the same transaction when the email was cancelled.
     */
    async cancel(teamId: number, id: string, nowIso: string, cancelledRank: number, inTransaction?: () => void): Promise<boolean> {
      return transact(db, async (trx) => {
        const res = await trx
          .updateTable('emails')
          .set({ latest_status: 'CANCELLED', status_rank: cancelledRank, updated_at: nowIso })
          .where('team_id', '=', teamId)
          .where('id', '=', id)
          .where('latest_status', '=', 'SCHEDULED')
          .where(notBeingAttempted)
          .executeTakeFirst();
        if (res.numUpdatedRows === 0n) return false;
        await trx.updateTable('deliveries').set({ state: 'cancelled', updated_at: nowIso, lease_owner: null, lease_until: null }).where('email_id', '=', id).where('state', '=', 'queued').where('lease_owner', 'is', null).execute();
        await refuseIfClaimedMeanwhile(trx, id);
        await trx.insertInto('email_events').values({ email_id: id, status: 'CANCELLED', data_json: null, created_at: nowIso }).execute();
        inTransaction?.();
        return true;
      }).catch(falseIfClaimed);
    },

    /**
     * Content retention: the ids `limit` allows, in order, after `afterId` and before `beforeId`, of
     * emails that still have content and whose ids are `idLength` long (those that begin with
     * their time: this is then a range of acceptance times on the primary key).
     */
    async withContentBetween(afterId: string, beforeId: string, idLength: number, limit: ChunkLimit): Promise<string[]> {
      return idsWithContent(afterId, limit, (q) => q.where('id', '<', beforeId).where(sql<number>`length(id)`, '=', idLength));
    },

    /**
     * Content retention: the ids `limit` allows, in order, after `afterId`, of emails that still have
     * content and whose ids are not `idLength` long (random ids, from before ids began with
     * their time: their place in key order says nothing of their age). A scan of the whole
     * table, done once.
     */
    async withContentOtherIds(afterId: string, idLength: number, limit: ChunkLimit): Promise<string[]> {
      return idsWithContent(afterId, limit, (q) => q.where(sql<number>`length(id)`, '<>', idLength));
    },

    /**
     * Content retention: empties the text, HTML and attachments of those of `ids` accepted before
     * `beforeIso` that nothing will send again (not SCHEDULED, no delivery queued), checked in
     * the same statement. Returns the ids emptied.
     */
    async emptyContent(ids: string[], beforeIso: string): Promise<Set<string>> {
      if (!ids.length) return new Set();
      const emptied = await db
        .updateTable('emails')
        .set({ text_body: null, html_body: null, attachments_json: null })
        .where('id', 'in', ids)
        .where('created_at', '<', beforeIso)
        .where('latest_status', '!=', 'SCHEDULED')
        .where(({ not, exists, selectFrom }) => not(exists(selectFrom('deliveries').select('deliveries.id').whereRef('deliveries.email_id', '=', 'emails.id').where('deliveries.state', '=', 'queued'))))
        .returning('id')
        .execute();
      return new Set(emptied.map((r) => r.id));
    },
  });
}
export type EmailsRepository = ReturnType<typeof createEmailsRepository>;
export type DeliveryRow = Selectable<DeliveriesTable>;
