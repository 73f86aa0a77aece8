import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Traffic shaping (docs/outbound.md, "Egress sources and traffic shaping"): the egress pool of a
// team and of a domain, why a delivery is parked by shaping, the holds that replies put on a
// (source, rollup), warm-up usage per day, and the source name on each attempt's trace.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('teams').addColumn('pool', 'text').execute();
  await db.schema.alterTable('domains').addColumn('pool', 'text').execute();
  // Set when shaping puts a claimed delivery back unattempted (a hold, the rate, the warm-up
  // budget); cleared by the next recorded attempt. Shown in the operator's queue.
  await db.schema.alterTable('deliveries').addColumn('held_reason', 'text').execute();
  await db.schema.alterTable('delivery_attempts').addColumn('source_name', 'text').execute();

  await db.schema
    .createTable('shaping_holds')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('rollup', 'text', (c) => c.notNull())
    // 'suspend' (nothing is sent) or 'throttle' (sent at message_rate at most)
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('message_rate', 'text')
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('until_ms', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await sql`create index shaping_holds_until on shaping_holds(until_ms)`.execute(db);

  await db.schema
    .createTable('warmup_usage')
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('rollup', 'text', (c) => c.notNull())
    // UTC date (YYYY-MM-DD) the messages were sent on
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('used', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('warmup_usage_pk', ['source', 'rollup', 'day'])
    .execute();
}
