import type { Generated } from 'kysely';

// Row shapes of the operator's tables (migration 20261126040000-operations).

export interface OperatorKeysTable {
  id: Generated<number>;
  name: string;
  public_id: string;
  /** SHA-256 hex of the secret part, as for team keys. */
  secret_hash: string;
  partial_key: string;
  last_used_at: string | null;
  created_at: string;
}

export interface OperatorAuditTable {
  id: Generated<number>;
  key_id: number | null;
  /** The console user who acted from the web console; null for a key or the CLI. */
  console_user_id: number | null;
  /** "key <id> (<name>)", "console user <id> (<email>)" or "cli". */
  actor: string;
  action: string;
  target_json: string;
  created_at: string;
}

export interface QueueSuspensionsTable {
  id: string;
  destination: string | null;
  team_id: number | null;
  campaign_id: string | null;
  reason: string;
  until_ms: number;
  created_by: string;
  created_at: string;
}

export interface DeliveryAttemptsTable {
  id: Generated<number>;
  email_id: string;
  team_id: number;
  rcpt_domain: string;
  started_at: number;
  mx_host: string | null;
  address: string | null;
  /** The local address the session was bound to. */
  source: string | null;
  /** The egress source's name (outbound.sources). */
  source_name: string | null;
  tls_json: string | null;
  results_json: string;
  transcript_json: string;
}
