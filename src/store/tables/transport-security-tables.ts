import type { Generated } from 'kysely';

// Row shapes of transport security: MTA-STS policies learnt, TLS sessions counted and the TLS
// reports (RFC 8460) sent and received (docs/outbound.md, TLS).

export type MtaStsMode = 'enforce' | 'testing' | 'none';

/** An MTA-STS policy learnt from a recipient domain (RFC 8461 §5.1 cache). */
export interface MtaStsPoliciesTable {
  domain: string;
  policy_id: string;
  body: string;
  fetched_at: number;
  expires_at: number;
}

/** Sessions to report (RFC 8460), per policy domain, UTC day, policy and result. */
export interface TlsSessionCountsTable {
  policy_domain: string;
  day: string;
  policy_key: string;
  policy_type: string;
  policy_json: string;
  result: string;
  sending_ip: string;
  mx_host: string;
  receiving_ip: string;
  reason_code: string;
  count: number;
}

export interface TlsReportsOutTable {
  policy_domain: string;
  day: string;
  report_id: string;
  state: 'no-rua' | 'queued';
  rua_json: string;
  report_json: string | null;
  created_at: string;
}

export interface TlsReportDeliveriesTable {
  id: Generated<number>;
  policy_domain: string;
  day: string;
  target: string;
  state: 'pending' | 'sent' | 'failed';
  attempts: number;
  next_attempt_at: number;
  lease_until: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

/** A TLS report (RFC 8460) received for a receiving domain. */
export interface ReceivedTlsReportsTable {
  id: string;
  team_id: number;
  domain_id: number;
  organization_name: string;
  report_id: string;
  contact_info: string | null;
  start_datetime: string;
  end_datetime: string;
  total_successful: number;
  total_failure: number;
  policies_json: string;
  mail_from: string;
  remote_ip: string | null;
  created_at: string;
}
