import type { EmailEventType } from '../events.js';

// latestStatus only moves forward in this order, so a late event never regresses it
// (architecture.md, Decisions: email status). Every event is still recorded on the email.
export const EMAIL_STATUS_ORDER = [
  'SCHEDULED',
  'CANCELLED',
  'RENDERING_FAILURE',
  'QUEUED',
  'SENT',
  'DELIVERY_DELAYED',
  'DELIVERED',
  'REJECTED',
  'BOUNCED',
  'OPENED',
  'CLICKED',
  'COMPLAINED',
  'FAILED',
  'SUPPRESSED',
] as const;

export type EmailStatus = (typeof EMAIL_STATUS_ORDER)[number];

export function statusRank(status: EmailStatus): number {
  return EMAIL_STATUS_ORDER.indexOf(status);
}

/** The webhook / bus event type of a status, e.g. DELIVERY_DELAYED -> email.delivery_delayed. */
export function statusEventType(status: Exclude<EmailStatus, 'SCHEDULED'>): EmailEventType {
  return `email.${status.toLowerCase()}` as EmailEventType;
}
