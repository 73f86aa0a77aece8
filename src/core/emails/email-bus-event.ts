import type { EmailRow } from '../../store/repositories/emails-repository.js';
import type { BusEvent, EmailEventType } from '../events.js';
import type { EmailStatus } from './email-status.js';

export type EmailEventSource = Pick<EmailRow, 'id' | 'team_id' | 'domain_id' | 'from_addr' | 'to_json' | 'subject' | 'campaign_id' | 'contact_id'>;

/**
 * The one shape of an email.* event (webhook payload `data`): the email's identity and
 * addressing, its status, when it happened, and the details of this event (recipient, reply,
 * bounce, open, click ...).
 */
export function emailBusEvent(type: EmailEventType, email: EmailEventSource, status: EmailStatus, at: string, extra: Record<string, unknown> = {}): BusEvent {
  return {
    type,
    teamId: email.team_id,
    domainId: email.domain_id,
    occurredAt: at,
    data: {
      id: email.id,
      status,
      from: email.from_addr,
      to: JSON.parse(email.to_json) as string[],
      subject: email.subject,
      domainId: email.domain_id,
      campaignId: email.campaign_id ?? undefined,
      contactId: email.contact_id ?? undefined,
      occurredAt: at,
      ...extra,
    },
  };
}
