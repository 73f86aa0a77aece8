import type { Insertable, Selectable } from 'kysely';
import type { Db } from '../db.js';
import { groupCommitOf } from '../group-commit.js';
import { withDialect } from '../store-context.js';
import type { OperatorAuditTable } from '../tables/operations-tables.js';

export type OperatorAuditRow = Selectable<OperatorAuditTable>;
export type OperatorAuditInsert = Insertable<OperatorAuditTable>;

export function createOperatorAuditRepository(db: Db) {
  // The entry of an operator action is written inside the action's own write (a group-commit fn
  // or a Kysely transaction: on SQLite one connection, so a synchronous statement lands in the
  // transaction open on it); PostgreSQL queues it and writes it before that transaction commits
  // (store/pg/pg-audit.ts). The action and its entry commit together or not at all.
  const sync = groupCommitOf(db);

  return withDialect(db, 'operatorAudit', {
    /** An entry with no change of its own to ride on (a CLI action on keys). */
    async insert(row: OperatorAuditInsert): Promise<void> {
      await db.insertInto('operator_audit').values(row).execute();
    },
    /** Inside the write transaction the caller has open (throws outside one); no transaction of its own. */
    insertInOpenTransaction(row: OperatorAuditInsert): void {
      if (!sync.sqlite.inTransaction) throw new Error('insertInOpenTransaction: no transaction is open');
      sync.sqlite // prepared statements are cached by their text (statement-cache.ts)
        .prepare('insert into operator_audit (key_id, console_user_id, actor, action, target_json, created_at) values (?, ?, ?, ?, ?, ?)')
        .run(row.key_id ?? null, row.console_user_id ?? null, row.actor, row.action, row.target_json, row.created_at);
    },
    /** Newest first, after the cursor (an id: rows older than it). */
    async page(limit: number, beforeId?: number): Promise<OperatorAuditRow[]> {
      let q = db.selectFrom('operator_audit').selectAll();
      if (beforeId !== undefined) q = q.where('id', '<', beforeId);
      return q.orderBy('id', 'desc').limit(limit).execute();
    },
  });
}
export type OperatorAuditRepository = ReturnType<typeof createOperatorAuditRepository>;
