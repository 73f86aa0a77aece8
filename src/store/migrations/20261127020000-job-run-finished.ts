import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// When a cron run ended (not stopped partway): a run whose node stopped or died before it ended
// is taken up by a live node (or by the node itself when it starts again) in the same period.
// Runs claimed before this column existed are taken as ended (the next tick runs them anyway).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table job_runs add column finished_at text`.execute(db);
  await sql`update job_runs set finished_at = started_at`.execute(db);
}
