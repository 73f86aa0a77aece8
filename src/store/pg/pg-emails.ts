import type { Kysely } from 'kysely';
import type { Database, EmailsTable } from '../tables/database.js';
import { BODY_BYTES_SQL, EMAIL_BODY_COLUMNS, EMAIL_COLUMNS, EMAIL_HEAD_COLUMNS, type EmailBody, type EmailHead, type EmailsRepository, type IdempotencyCompletion, type NewEmail } from '../repositories/emails-repository.js';
import { createPgBatcher } from './pg-batcher.js';
import { pgPoolOf, sharedOf } from './pg-context.js';
import { createPgLoader } from './pg-loader.js';
import { openTxWrites, type PgExec, type TxWriteKind } from './pg-exec.js';
import { RecipientGoneError } from '../store-errors.js';

/*
 * Accepting sends on PostgreSQL: the sends that arrive together are stored by ONE statement
 * (data-modifying CTEs over unnest arrays: campaign recipients, emails, tags, deliveries, events
 * and the idempotency completions), then their transactional outbox rows and rollups
 * (pg-exec.ts), then one COMMIT. A duplicate campaign recipient fails its own send only (the
 * batcher retries each send alone when a batch fails).
 */

interface AcceptCall {
  items: NewEmail[];
  idem?: IdempotencyCompletion;
  inTransaction?: () => void;
}

const INT_COLUMNS = new Set<keyof EmailsTable>(['team_id', 'domain_id', 'api_key_id', 'open_tracking', 'click_tracking', 'accepted_in_sandbox', 'status_rank']);
const EMAIL_TYPES = EMAIL_COLUMNS.map((c) => (INT_COLUMNS.has(c) ? 'bigint[]' : 'text[]'));

/** Parameters $1.. in order: campaign recipients (3), emails (one per column), tags (3), deliveries (8), events (4), idempotency (3). */
const ACCEPT_SQL = (() => {
  let n = 0;
  const p = (type: string) => `$${++n}::${type}`;
  const cr = [p('text[]'), p('text[]'), p('text[]')];
  const em = EMAIL_TYPES.map(p);
  const tg = [p('text[]'), p('bigint[]'), p('text[]')];
  const dl = [p('text[]'), p('bigint[]'), p('text[]'), p('text[]'), p('text[]'), p('bigint[]'), p('bigint[]'), p('text[]')];
  const ev = [p('text[]'), p('text[]'), p('text[]'), p('text[]')];
  const ik = [p('bigint[]'), p('text[]'), p('text[]')];
  return `with
  cr as (insert into campaign_recipients (campaign_id, contact_id, email_id) select * from unnest(${cr.join(', ')})),
  em as (insert into emails (${EMAIL_COLUMNS.join(', ')}) select * from unnest(${em.join(', ')})),
  tg as (insert into email_tags (email_id, team_id, tag) select * from unnest(${tg.join(', ')})),
  dl as (insert into deliveries (email_id, team_id, recipient, rcpt_domain, kind, state, attempts, next_attempt_at, due_since, updated_at)
         select e, t, r, rd, k, 'queued', 0, n, ds, u from unnest(${dl.join(', ')}) as x(e, t, r, rd, k, n, ds, u)),
  ev as (insert into email_events (email_id, status, data_json, created_at) select * from unnest(${ev.join(', ')})),
  ik as (update idempotency_keys k set state = 'done', response_json = x.r from unnest(${ik.join(', ')}) as x(t, k, r)
         where k.team_id = x.t and k.key = x.k)
select 1`;
})();

function acceptParams(calls: AcceptCall[]): unknown[] {
  const cr: [string[], string[], string[]] = [[], [], []];
  const em: unknown[][] = EMAIL_COLUMNS.map(() => []);
  const tg: [string[], number[], string[]] = [[], [], []];
  const dl: [string[], number[], string[], string[], string[], number[], number[], string[]] = [[], [], [], [], [], [], [], []];
  const ev: [string[], string[], (string | null)[], string[]] = [[], [], [], []];
  const ik: [number[], string[], string[]] = [[], [], []];
  for (const call of calls) {
    for (const item of call.items) {
      const r = item.row;
      if (item.campaignRecipient) {
        cr[0].push(item.campaignRecipient.campaignId);
        cr[1].push(item.campaignRecipient.contactId);
        cr[2].push(r.id);
      }
      EMAIL_COLUMNS.forEach((c, i) => em[i]!.push(r[c]));
      for (const tag of item.tags) {
        tg[0].push(r.id);
        tg[1].push(r.team_id);
        tg[2].push(tag);
      }
      const acceptedAt = Date.parse(r.created_at);
      for (const d of item.deliveries) {
        dl[0].push(r.id);
        dl[1].push(r.team_id);
        dl[2].push(d.recipient);
        dl[3].push(d.rcptDomain);
        dl[4].push(d.kind);
        dl[5].push(d.nextAttemptAt);
        // The give-up age counts from the time a delivery is due (a scheduled send's time).
        dl[6].push(Math.max(acceptedAt, d.nextAttemptAt));
        dl[7].push(r.created_at);
      }
      for (const e of item.events) {
        ev[0].push(r.id);
        ev[1].push(e.status);
        ev[2].push(e.data === undefined || e.data === null ? null : JSON.stringify(e.data));
        ev[3].push(e.createdAt);
      }
    }
    if (call.idem) {
      ik[0].push(call.idem.teamId);
      ik[1].push(call.idem.key);
      ik[2].push(call.idem.responseJson);
    }
  }
  return [...cr, ...em, ...tg, ...dl, ...ev, ...ik];
}

/**
 * Campaign messages are written only while their contacts are still subscribed and unsuppressed,
 * checked in the write's transaction: an unsubscribe committed after the audience was read is
 * honoured. The rows are held (FOR SHARE) until the commit, so an unsubscribe that comes while
 * this transaction is open waits for it and the message counts as queued before it. A contact
 * gone fails the batch; the batcher then writes each send alone, and only that one fails.
 */
async function refuseGoneRecipients(exec: PgExec, calls: AcceptCall[]): Promise<void> {
  const wanted = calls.flatMap((call) => call.items.flatMap((item) => (item.campaignRecipient ? [{ contactId: item.campaignRecipient.contactId, teamId: item.row.team_id }] : [])));
  if (!wanted.length) return;
  const rows = await exec.query<{ id: string }>(
    `select c.id from contacts c join unnest($1::text[], $2::bigint[]) as w(id, team_id) on c.id = w.id and c.team_id = w.team_id
     where c.subscribed = 1 and not exists (select 1 from suppressions s where s.team_id = c.team_id and s.email = c.email)
     for share of c`,
    [wanted.map((x) => x.contactId), wanted.map((x) => x.teamId)],
  );
  const still = new Set(rows.map((r) => r.id));
  const gone = wanted.find((x) => !still.has(x.contactId));
  if (gone) throw new RecipientGoneError(gone.contactId);
}

/**
 * Emails accepted inside another write's transaction (a double opt-in confirmation in its
 * contact's): the same statement, written just before that transaction commits. First of the
 * kinds, so their events' outbox rows and rollups (written after) find them.
 */
const ACCEPTED_IN_TX: TxWriteKind<NewEmail[]> = {
  name: 'accepted-emails',
  order: 1,
  async flush(exec, lists) {
    const calls = lists.map((items) => ({ items }));
    await refuseGoneRecipients(exec, calls);
    await exec.run(ACCEPT_SQL, acceptParams(calls));
  },
};

export function pgEmails(db: Kysely<Database>): Partial<EmailsRepository> {
  const pool = pgPoolOf(db);
  const accept = sharedOf(db, 'accept', () => createPgBatcher<AcceptCall, void>(
    pool,
    async (exec, calls) => {
      await refuseGoneRecipients(exec, calls);
      await exec.run(ACCEPT_SQL, acceptParams(calls));
      // The transactional outbox of each send; its rows are written before the commit.
      for (const call of calls) call.inTransaction?.();
      return calls.map(() => undefined);
    },
    { maxConcurrent: 4 },
  ));
  const headById = createPgLoader<string, EmailHead>(pool, `select ${EMAIL_HEAD_COLUMNS.join(', ')}, ${BODY_BYTES_SQL} as body_bytes from emails where id = any($1::text[])`, (r) => r.id);
  const bodyById = createPgLoader<string, EmailBody & { id: string }>(pool, `select id, ${EMAIL_BODY_COLUMNS.join(', ')} from emails where id = any($1::text[])`, (r) => r.id);
  return {
    async insertAccepted(items: NewEmail[], idem?: IdempotencyCompletion, inTransaction?: () => void): Promise<void> {
      await accept.write({ items, idem, inTransaction });
    },
    insertAcceptedInOpenTransaction(items: NewEmail[]): void {
      openTxWrites('insertAcceptedInOpenTransaction').add(ACCEPTED_IN_TX, items);
    },
    findHeadAnyTeamFast: headById,
    async findBodyAnyTeamFast(id: string): Promise<EmailBody | undefined> {
      const row = await bodyById(id);
      return row && { text_body: row.text_body, html_body: row.html_body, attachments_json: row.attachments_json };
    },
  };
}
