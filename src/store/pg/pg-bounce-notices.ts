import type { BounceNoticesRepository, NewBounceNoticeRecipient } from '../repositories/bounce-notices-repository.js';
import { openTxWrites, type TxWriteKind } from './pg-exec.js';

/*
 * Bounce notices' pending recipients on PostgreSQL: the transactional handler only queues them;
 * before the outcome's transaction commits, the batch is written with one statement (only the
 * rows of emails submitted with a sender, as on SQLite).
 */
const PENDING: TxWriteKind<NewBounceNoticeRecipient> = {
  name: 'bounce-notices',
  order: 30,
  async flush(exec, rows) {
    await exec.run(
      `insert into bounce_notice_recipients (email_id, team_id, recipient, reply, smtp_code, mx_host, reason, status, expired, created_at, next_attempt_at, attempts)
       select e.id, e.team_id, x.recipient, x.reply, x.smtp_code, x.mx_host, x.reason, x.status, x.expired, x.at, x.at, 0
       from unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[])
         as x(email_id, recipient, reply, smtp_code, mx_host, reason, status, expired, at)
       join emails e on e.id = x.email_id
       where e.submitted_by <> ''`,
      [
        rows.map((r) => r.emailId),
        rows.map((r) => r.recipient),
        rows.map((r) => r.reply),
        rows.map((r) => r.smtpCode),
        rows.map((r) => r.mxHost),
        rows.map((r) => r.reason),
        rows.map((r) => r.status),
        rows.map((r) => (r.expired ? 1 : 0)),
        rows.map((r) => r.atMs),
      ],
    );
  },
};

export function pgBounceNotices(): Partial<BounceNoticesRepository> {
  return {
    addInOpenTransaction(rows: readonly NewBounceNoticeRecipient[]): void {
      const writes = openTxWrites('addInOpenTransaction');
      for (const r of rows) writes.add(PENDING, r);
    },
  };
}
