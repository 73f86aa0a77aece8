// What the operator's queue page needs (pages/operator-queue-page.ts). Today the delivery
// service provides it (the calls `posthorn queue` makes); a richer operator queue service can
// be passed in app.ts instead without touching the page's callers.

export interface QueuedDelivery {
  id: number;
  email_id: string;
  team_id: number;
  recipient: string;
  rcpt_domain: string;
  attempts: number;
  next_attempt_at: number;
  last_code: number | null;
  last_response: string | null;
}

export interface QueueSource {
  countsByState(): Promise<{ state: string; count: number }[]>;
  listQueued(limit: number): Promise<QueuedDelivery[]>;
  retryNow(deliveryId: number): Promise<boolean>;
  purge(deliveryId: number): Promise<void>;
}
