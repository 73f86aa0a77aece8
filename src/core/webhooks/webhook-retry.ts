// Webhook retry policy (architecture.md, House rules 5: policy is data). The spec fixes 6 attempts with
// exponential backoff; the waits are ours. Front-loaded like Postal (2-15 min) and useSend
// (5 s doubling): a receiver that blipped gets the event seconds later, one being deployed
// within minutes, and the last attempt comes about 43 minutes after the event.
const SECOND_MS = 1000;
const MINUTE_MS = 60 * SECOND_MS;

export const WEBHOOK_MAX_ATTEMPTS = 6;

/** Wait before the next attempt, indexed by attempts made so far minus one. */
export const WEBHOOK_RETRY_DELAYS_MS: readonly number[] = [
  5 * SECOND_MS, // after attempt 1: a restart or a load-balancer hiccup
  30 * SECOND_MS, // after attempt 2
  2 * MINUTE_MS, // after attempt 3
  10 * MINUTE_MS, // after attempt 4: a deploy or a short outage
  30 * MINUTE_MS, // after attempt 5: the 6th and last attempt follows
];

/**
 * Up to +20%, never earlier than the table: thousands of events that failed together
 * against one receiver do not all come back in the same second.
 */
export const WEBHOOK_RETRY_JITTER_RATIO = 0.2;

/** Delay before the next attempt after `attemptsMade` failed ones, or null when the call is abandoned. */
export function webhookRetryDelayMs(attemptsMade: number, random: () => number = Math.random): number | null {
  if (attemptsMade >= WEBHOOK_MAX_ATTEMPTS) return null;
  const base = WEBHOOK_RETRY_DELAYS_MS[Math.max(attemptsMade - 1, 0)]!;
  return Math.round(base * (1 + WEBHOOK_RETRY_JITTER_RATIO * random()));
}

/** Calls in flight per endpoint, for the cluster (each node takes its share): a slow endpoint holds only its own slots. */
export const WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT = 4;
/** Calls in flight in all (per node) by default: webhooks.maxInFlight, which bounds webhooks.maxInFlightPerHost. */
export const WEBHOOK_MAX_IN_FLIGHT = 64;
