import type { ColumnType } from 'kysely';

// Row shapes of the cluster's tables (migration 20261126080000-cluster): several nodes sharing
// one PostgreSQL store. They exist on SQLite too (the same migrations run on both), unused there.

/** A column the code that inserts rows may leave out (it defaults to null). */
type Optional<T> = ColumnType<T | null, T | null | undefined, T | null>;

export interface ClusterNodesTable {
  /** cluster.nodeName, or <hostname>:<pid>: the owner written on every lease this node takes. */
  id: string;
  hostname: string;
  pid: number;
  started_at: string;
  /** epoch ms of the last heartbeat; a node silent for longer than the stale time is dead. */
  heartbeat_at: number;
  /** {http, inbound, submission}: where this node listens. */
  listeners_json: string;
}

/** One row per (job, period) a cron job ran: the primary key makes it run once per cluster. */
export interface JobRunsTable {
  job: string;
  /** The scheduled time of the run (ISO, to the second). */
  period: string;
  /** The node running it (the one that took it up, for a run another node left unfinished). */
  node: string;
  started_at: string;
  /** When it ended (not stopped partway); null while it runs, or left unfinished by a node stopped or dead. */
  finished_at: Optional<string>;
}

/** Requests counted per team and 1-second window, shared by the nodes. */
export interface RateLimitWindowsTable {
  team_id: number;
  /** epoch ms of the window's start */
  window_start: number;
  count: number;
}

/** Connections a node has open to one destination (address:port), so the limit holds for the cluster. */
export interface ConnectionLeasesTable {
  host_key: string;
  node: string;
  count: number;
  /** epoch ms; refreshed by the node's heartbeat, so a dead node's connections stop counting. */
  until_ms: number;
  /** epoch ms: the node was refused a session and is asking again; while set, the others keep to a fair share. */
  waiting_until: Optional<number>;
}

/** A campaign batch in progress is leased by the node sending it. */
export interface CampaignBatchLeaseColumns {
  batch_owner: Optional<string>;
  batch_lease_until: Optional<number>;
}

/** The node whose request holds an in-flight idempotency key (released when that node is gone). */
export interface IdempotencyOwnerColumns {
  owner: Optional<string>;
  /** The request holding the key while in flight: it gives up its own claim only. */
  token: Optional<string>;
}

/** Traffic shaping's message rate per (source, rollup), shared by the nodes (GCRA). */
export interface ShapingRatesTable {
  source: string;
  rollup: string;
  /** epoch ms: the theoretical arrival time of the next message. */
  tat_ms: number;
}

/** The node running a contact import (taken over when that node is gone). */
export interface ContactImportOwnerColumns {
  owner: Optional<string>;
}
