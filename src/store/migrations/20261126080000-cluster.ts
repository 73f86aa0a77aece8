import type { Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Several nodes sharing one PostgreSQL store (docs/scaling.md): the nodes and their heartbeats,
// cron runs claimed once per cluster, rate-limit windows shared by the nodes, per-destination
// connection counts, the message-rate slots of traffic shaping shared by the nodes, and the
// owner of a campaign batch, an in-flight idempotency key or a running contact import, so a
// dead node's work is taken over. Written once like every migration; on SQLite (one node) the
// tables stay empty.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('cluster_nodes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('hostname', 'text', (c) => c.notNull())
    .addColumn('pid', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('heartbeat_at', 'integer', (c) => c.notNull()) // epoch ms
    .addColumn('listeners_json', 'text', (c) => c.notNull().defaultTo('{}'))
    .execute();

  await db.schema
    .createTable('job_runs')
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('node', 'text', (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('job_runs_pk', ['job', 'period'])
    .execute();

  await db.schema
    .createTable('rate_limit_windows')
    .addColumn('team_id', 'integer', (c) => c.notNull())
    .addColumn('window_start', 'integer', (c) => c.notNull()) // epoch ms
    .addColumn('count', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('rate_limit_windows_pk', ['team_id', 'window_start'])
    .execute();

  await db.schema
    .createTable('connection_leases')
    .addColumn('host_key', 'text', (c) => c.notNull())
    .addColumn('node', 'text', (c) => c.notNull())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addColumn('until_ms', 'integer', (c) => c.notNull()) // epoch ms
    // epoch ms: the node was refused a session until then and asks again (fair shares)
    .addColumn('waiting_until', 'integer')
    .addPrimaryKeyConstraint('connection_leases_pk', ['host_key', 'node'])
    .execute();

  // GCRA per (source, rollup): the theoretical arrival time of the next message, for the cluster.
  await db.schema
    .createTable('shaping_rates')
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('rollup', 'text', (c) => c.notNull())
    .addColumn('tat_ms', 'integer', (c) => c.notNull()) // epoch ms
    .addPrimaryKeyConstraint('shaping_rates_pk', ['source', 'rollup'])
    .execute();

  await db.schema.alterTable('contact_imports').addColumn('owner', 'text').execute();
  await db.schema.alterTable('campaigns').addColumn('batch_owner', 'text').execute();
  await db.schema.alterTable('campaigns').addColumn('batch_lease_until', 'integer').execute();
  await db.schema.alterTable('idempotency_keys').addColumn('owner', 'text').execute();
}
