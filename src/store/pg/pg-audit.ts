import type { Kysely } from 'kysely';
import type { Database } from '../tables/database.js';
import type { OperatorAuditInsert, OperatorAuditRepository } from '../repositories/operator-audit-repository.js';
import { openTxWrites, type TxWriteKind } from './pg-exec.js';

/*
 * The operator audit log on PostgreSQL: an action's entry is queued while its write transaction
 * runs and written in that transaction just before the commit (pg-exec.ts, TxWrites), so the
 * action and its entry commit together or not at all.
 */

const AUDIT: TxWriteKind<OperatorAuditInsert> = {
  name: 'operator-audit',
  order: 30,
  async flush(exec, rows) {
    await exec.run(
      `insert into operator_audit (key_id, console_user_id, actor, action, target_json, created_at)
       select k, c, a, ac, t, at from unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[]) with ordinality as x(k, c, a, ac, t, at, n) order by n`,
      [rows.map((r) => r.key_id ?? null), rows.map((r) => r.console_user_id ?? null), rows.map((r) => r.actor), rows.map((r) => r.action), rows.map((r) => r.target_json), rows.map((r) => r.created_at)],
    );
  },
};

export function pgAudit(_db: Kysely<Database>): Partial<OperatorAuditRepository> {
  return {
    insertInOpenTransaction(row: OperatorAuditInsert): void {
      openTxWrites('insertInOpenTransaction').add(AUDIT, row);
    },
  };
}
