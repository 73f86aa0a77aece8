// Row shapes of traffic shaping (migration 20261126050000-traffic-shaping).

export interface ShapingHoldsTable {
  id: string;
  /** Egress source name. */
  source: string;
  /** The rollup the hold applies to (a recipient domain, or an MX suffix such as google.com). */
  rollup: string;
  kind: 'suspend' | 'throttle';
  /** With a throttle: the rate ("N/s", "N/min", "N/h"). */
  message_rate: string | null;
  reason: string;
  until_ms: number;
  created_at: string;
}

export interface WarmupUsageTable {
  source: string;
  rollup: string;
  /** UTC date, YYYY-MM-DD. */
  day: string;
  used: number;
}
