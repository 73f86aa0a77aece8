import type { Insertable, Selectable } from 'kysely';
import type { Db } from '../db.js';
import { transact } from '../store-context.js';
import { storedBytes, withinBytes, type ChunkLimit } from './content-chunks.js';
import type { ReceivedAttachmentsTable, ReceivedEmailsTable } from '../tables/database.js';
import { boundedRead } from '../bounded-read.js';

export type ReceivedEmailRow = Selectable<ReceivedEmailsTable>;
export type ReceivedAttachmentRow = Selectable<ReceivedAttachmentsTable>;
export type ReceivedAttachmentMeta = Omit<ReceivedAttachmentRow, 'content'>;

export interface NewReceivedEmail {
  row: Insertable<ReceivedEmailsTable>;
  raw: Buffer;
  attachments: Omit<Insertable<ReceivedAttachmentsTable>, 'received_email_id' | 'id'>[];
}

export interface ReceivedListFilter {
  teamId: number;
  domainIds?: number[];
  offset: number;
  limit: number;
}

export function createReceivedEmailsRepository(db: Db) {
  return {
    /**
     * Stores messages with their raw bytes and attachments in one transaction: the inbound
     * listener answers 250 only after this resolves, so an accepted message is never lost.
     * A message whose dedupe key its domain already has (the sender retried it) is not stored
     * again. Returns, per item, the id of the stored copy and whether this call stored it;
     * `inTransaction` gets the ids it stored and runs synchronously inside the same
     * transaction, last (the transactional outbox).
     */
    async insertMany(items: NewReceivedEmail[], inTransaction?: (storedIds: ReadonlySet<string>) => void): Promise<{ id: string; stored: boolean }[]> {
      if (!items.length) return [];
      return transact(db, async (trx) => {
        const out: { id: string; stored: boolean }[] = [];
        for (const item of items) {
          const inserted = await trx
            .insertInto('received_emails')
            .values(item.row)
            .onConflict((oc) => oc.columns(['team_id', 'domain_id', 'dedupe_key']).doNothing())
            .returning('id')
            .executeTakeFirst();
          if (!inserted) {
            const existing = await trx
              .selectFrom('received_emails')
              .select('id')
              .where('team_id', '=', item.row.team_id)
              .where('domain_id', '=', item.row.domain_id)
              .where('dedupe_key', '=', item.row.dedupe_key!)
              .executeTakeFirstOrThrow();
            out.push({ id: existing.id, stored: false });
            continue;
          }
          await trx.insertInto('received_email_raw').values({ received_email_id: item.row.id, raw: item.raw }).execute();
          for (const a of item.attachments) {
            await trx
              .insertInto('received_attachments')
              .values({ ...a, received_email_id: item.row.id })
              .execute();
          }
          out.push({ id: item.row.id, stored: true });
        }
        inTransaction?.(new Set(out.filter((o) => o.stored).map((o) => o.id)));
        return out;
      });
    },

    async list(f: ReceivedListFilter): Promise<{ rows: ReceivedEmailRow[]; total: number }> {
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('received_emails').where('team_id', '=', f.teamId);
        // An empty list matches nothing (never every row, never `in ()`).
        if (f.domainIds) q = q.where('domain_id', 'in', f.domainIds.length ? f.domainIds : [-1]);
        // One after the other: they share the read's connection.
        const rows = await q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').limit(f.limit).offset(f.offset).execute();
        const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        return { rows, total: Number(total.n) };
      });
    },

    async findById(teamId: number, id: string): Promise<ReceivedEmailRow | undefined> {
      return db.selectFrom('received_emails').selectAll().where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
    },

    async attachments(receivedEmailId: string): Promise<ReceivedAttachmentRow[]> {
      return db.selectFrom('received_attachments').selectAll().where('received_email_id', '=', receivedEmailId).orderBy('position').execute();
    },

    /**
     * Content retention: the received emails stored from `fromIso` on and before `beforeIso` that
     * still have their message, oldest first, as many as `limit` allows (by the size of their
     * message: the text, HTML and attachments come from it), lose their raw message, text, HTML
     * and attachments. A walk on received_emails_created: the raw row marks content still kept,
     * so the ones emptied are skipped. `through` is when the last one emptied was stored (null:
     * none left before `beforeIso`).
     */
    async purgeContent(fromIso: string, beforeIso: string, limit: ChunkLimit): Promise<{ through: string | null; emptied: number }> {
      return transact(db, async (trx) => {
        const rows = await trx
          .selectFrom('received_emails as e')
          .innerJoin('received_email_raw as r', 'r.received_email_id', 'e.id')
          .select(['e.id', 'e.created_at', storedBytes('r.raw').as('bytes')])
          .where('e.created_at', '>=', fromIso)
          .where('e.created_at', '<', beforeIso)
          .orderBy('e.created_at')
          .limit(limit.rows)
          .execute();
        const chunk = withinBytes(rows, limit.bytes);
        if (!chunk.length) return { through: null, emptied: 0 };
        const ids = chunk.map((r) => r.id);
        await trx.deleteFrom('received_attachments').where('received_email_id', 'in', ids).execute();
        await trx.updateTable('received_emails').set({ text_body: null, html_body: null }).where('id', 'in', ids).execute();
        await trx.deleteFrom('received_email_raw').where('received_email_id', 'in', ids).execute();
        return { through: chunk[chunk.length - 1]!.created_at, emptied: ids.length };
      });
    },

    async hasRaw(receivedEmailId: string): Promise<boolean> {
      const r = await db.selectFrom('received_email_raw').select('received_email_id').where('received_email_id', '=', receivedEmailId).executeTakeFirst();
      return !!r;
    },

    async raw(receivedEmailId: string): Promise<Buffer | undefined> {
      const r = await db.selectFrom('received_email_raw').select('raw').where('received_email_id', '=', receivedEmailId).executeTakeFirst();
      return r?.raw;
    },
  };
}
export type ReceivedEmailsRepository = ReturnType<typeof createReceivedEmailsRepository>;
