import type { Generated } from 'kysely';

// Row shapes of every table. Timestamps are ISO-8601 UTC strings (they sort as text);
// due times used by claim queries are integer epoch milliseconds.

export interface TeamsTable {
  id: Generated<number>;
  name: string;
  /** Per-team override of the API requests-per-second limit; null = config default. */
  rate_limit: number | null;
  created_at: string;
  updated_at: string;
}

export interface ApiKeysTable {
  id: Generated<number>;
  team_id: number;
  name: string;
  /** The public part of `ph_<public id>_<secret>`, used to find the row. */
  public_id: string;
  /** SHA-256 hex of the secret part (DESIGN 4: the secret has 128+ random bits). */
  secret_hash: string;
  /** First and last characters of the full key, so users can tell keys apart. */
  partial_key: string;
  permission: 'FULL' | 'SENDING';
  domain_id: number | null;
  last_used_at: string | null;
  created_at: string;
}

export interface SettingsTable {
  key: string;
  value: string;
}

export type DomainStatus = 'NOT_STARTED' | 'PENDING' | 'SUCCESS' | 'FAILED' | 'TEMPORARY_FAILURE';

export interface DomainsTable {
  id: Generated<number>;
  team_id: number;
  name: string;
  region: string;
  status: DomainStatus;
  subdomain: string | null;
  dkim_selector: string;
  /** PKCS#8 PEM; never leaves the store except to the signer. */
  dkim_private_key: string;
  /** Base64 SubjectPublicKeyInfo: the p= value of the DKIM record. */
  public_key: string;
  bounce_label: string;
  dkim_status: DomainStatus | null;
  spf_status: DomainStatus | null;
  mx_status: DomainStatus | null;
  dmarc_status: DomainStatus | null;
  dmarc_added: number;
  click_tracking: number;
  open_tracking: number;
  tracking_domain: string | null;
  tracking_domain_status: DomainStatus | null;
  tls_policy: 'OPPORTUNISTIC' | 'ENFORCED';
  receiving: number;
  receiving_mx_status: DomainStatus | null;
  is_verifying: number;
  error_message: string | null;
  verification_error: string | null;
  last_checked_at: string | null;
  unverified_since: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface Database {
  domains: DomainsTable;
  teams: TeamsTable;
  api_keys: ApiKeysTable;
  settings: SettingsTable;
}
