import { sql, type Insertable, type Selectable } from 'kysely';
import { transact } from '../store-context.js';
import type { Db } from '../db.js';
import type { SandboxMessagesTable } from '../tables/database.js';
import { storedBytes, withinBytes, type ChunkLimit } from './content-chunks.js';
import { boundedRead } from '../bounded-read.js';

export type SandboxMessageRow = Selectable<SandboxMessagesTable>;

export interface SandboxListFilter {
  teamId: number;
  /** A key bound to a domain sees only that domain's messages. */
  domainId: number | null;
  offset: number;
  limit: number;
}

export function createSandboxMessagesRepository(db: Db) {
  return {
    /** The row and its raw bytes in one transaction. */
    async insert(row: Insertable<SandboxMessagesTable>, raw: Buffer): Promise<void> {
      await transact(db, async (trx) => {
        await trx.insertInto('sandbox_messages').values(row).execute();
        await trx.insertInto('sandbox_message_raw').values({ sandbox_message_id: row.id, raw }).execute();
      });
    },

    /** Newest first: by capture time, then by insertion order (rowid) within one instant. */
    async list(f: SandboxListFilter): Promise<{ rows: SandboxMessageRow[]; total: number }> {
      return boundedRead(db, async (rdb) => {
        let q = rdb.selectFrom('sandbox_messages').where('team_id', '=', f.teamId);
        if (f.domainId !== null) q = q.where('domain_id', '=', f.domainId);
        // One after the other: they share the read's connection.
        const rows = await q.selectAll().orderBy('created_at', 'desc').orderBy(sql`rowid`, 'desc').limit(f.limit).offset(f.offset).execute();
        const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
        return { rows, total: Number(total.n) };
      });
    },

    async findById(teamId: number, id: string): Promise<SandboxMessageRow | undefined> {
      return db.selectFrom('sandbox_messages').selectAll().where('team_id', '=', teamId).where('id', '=', id).executeTakeFirst();
    },

    /**
     * Content retention: deletes the captures made before `beforeIso` that `limit` allows;
     * returns how many. Found through sandbox_messages_created: what is old is deleted, so the
     * range holds only what is left to delete.
     */
    async purgeBefore(beforeIso: string, limit: ChunkLimit): Promise<number> {
      return transact(db, async (trx) => {
        const rows = await trx
          .selectFrom('sandbox_messages as m')
          .leftJoin('sandbox_message_raw as r', 'r.sandbox_message_id', 'm.id')
          .select(['m.id', storedBytes('r.raw').as('bytes')])
          .where('m.created_at', '<', beforeIso)
          .limit(limit.rows)
          .execute();
        const ids = withinBytes(rows, limit.bytes).map((r) => r.id);
        if (!ids.length) return 0;
        await trx.deleteFrom('sandbox_message_raw').where('sandbox_message_id', 'in', ids).execute();
        await trx.deleteFrom('sandbox_messages').where('id', 'in', ids).execute();
        return ids.length;
      });
    },

    async raw(id: string): Promise<Buffer | undefined> {
      const r = await db.selectFrom('sandbox_message_raw').select('raw').where('sandbox_message_id', '=', id).executeTakeFirst();
      return r?.raw;
    },
  };
}
export type SandboxMessagesRepository = ReturnType<typeof createSandboxMessagesRepository>;
