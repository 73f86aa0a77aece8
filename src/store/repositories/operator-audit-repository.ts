import type { Insertable, Selectable } from 'kysely';
import type { Db } from '../db.js';
import type { OperatorAuditTable } from '../tables/operations-tables.js';

export type OperatorAuditRow = Selectable<OperatorAuditTable>;

export function createOperatorAuditRepository(db: Db) {
  return {
    async insert(row: Insertable<OperatorAuditTable>): Promise<void> {
      await db.insertInto('operator_audit').values(row).execute();
    },
    /** Newest first, after the cursor (an id: rows older than it). */
    async page(limit: number, beforeId?: number): Promise<OperatorAuditRow[]> {
      let q = db.selectFrom('operator_audit').selectAll();
      if (beforeId !== undefined) q = q.where('id', '<', beforeId);
      return q.orderBy('id', 'desc').limit(limit).execute();
    },
  };
}
export type OperatorAuditRepository = ReturnType<typeof createOperatorAuditRepository>;
