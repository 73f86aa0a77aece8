import type { Selectable } from 'kysely';
import type { Db } from '../db.js';
import { transact } from '../store-context.js';
import type { OperatorKeysTable } from '../tables/operations-tables.js';

export type OperatorKeyRow = Selectable<OperatorKeysTable>;

export function createOperatorKeysRepository(db: Db) {
  return {
    /** `inTransaction` runs inside the insert's transaction with the new id (the operator's audit entry commits with it). */
    async insert(row: Omit<OperatorKeyRow, 'id' | 'last_used_at'>, inTransaction?: (id: number) => void): Promise<number> {
      return transact(db, async (trx) => {
        const r = await trx.insertInto('operator_keys').values(row).returning('id').executeTakeFirstOrThrow();
        inTransaction?.(r.id);
        return r.id;
      });
    },
    async findByPublicId(publicId: string): Promise<OperatorKeyRow | undefined> {
      return db.selectFrom('operator_keys').selectAll().where('public_id', '=', publicId).executeTakeFirst();
    },
    async list(): Promise<OperatorKeyRow[]> {
      return db.selectFrom('operator_keys').selectAll().orderBy('id').execute();
    },
    /** False when there is no such key; otherwise `inTransaction` runs inside the delete's transaction (the operator's audit entry commits with it). */
    async delete(id: number, inTransaction?: () => void): Promise<boolean> {
      return transact(db, async (trx) => {
        const res = await trx.deleteFrom('operator_keys').where('id', '=', id).executeTakeFirst();
        if (res.numDeletedRows === 0n) return false;
        inTransaction?.();
        return true;
      });
    },
    async touch(id: number, nowIso: string): Promise<void> {
      await db.updateTable('operator_keys').set({ last_used_at: nowIso }).where('id', '=', id).execute();
    },
  };
}
export type OperatorKeysRepository = ReturnType<typeof createOperatorKeysRepository>;
