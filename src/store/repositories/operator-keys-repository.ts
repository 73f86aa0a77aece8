import type { Selectable } from 'kysely';
import type { Db } from '../db.js';
import type { OperatorKeysTable } from '../tables/operations-tables.js';

export type OperatorKeyRow = Selectable<OperatorKeysTable>;

export function createOperatorKeysRepository(db: Db) {
  return {
    async insert(row: Omit<OperatorKeyRow, 'id' | 'last_used_at'>): Promise<number> {
      const r = await db.insertInto('operator_keys').values(row).returning('id').executeTakeFirstOrThrow();
      return r.id;
    },
    async findByPublicId(publicId: string): Promise<OperatorKeyRow | undefined> {
      return db.selectFrom('operator_keys').selectAll().where('public_id', '=', publicId).executeTakeFirst();
    },
    async list(): Promise<OperatorKeyRow[]> {
      return db.selectFrom('operator_keys').selectAll().orderBy('id').execute();
    },
    async delete(id: number): Promise<boolean> {
      const res = await db.deleteFrom('operator_keys').where('id', '=', id).executeTakeFirst();
      return res.numDeletedRows > 0n;
    },
    async touch(id: number, nowIso: string): Promise<void> {
      await db.updateTable('operator_keys').set({ last_used_at: nowIso }).where('id', '=', id).execute();
    },
  };
}
export type OperatorKeysRepository = ReturnType<typeof createOperatorKeysRepository>;
