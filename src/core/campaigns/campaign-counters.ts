import type { CampaignsRepository, CountedStatus } from '../../store/repositories/campaigns-repository.js';
import type { ContactService } from '../contacts/contact-service.js';
import type { BusEvent } from '../events.js';
import { retryOnConnectionLoss } from '../connection-retry.js';
import { isMachineHit } from '../tracking/machine-hits.js';

// A campaign's counters (sent, delivered, opened, ... unsubscribed), moved by its emails' status
// events as they arrive, once per email and status, and recounted from the stored events for
// what a killed process never counted.

/** Campaign recipients re-checked per write when counters are recovered at startup. */
const RECOUNT_CHUNK = 2000;

const COUNTED: Partial<Record<BusEvent['type'], CountedStatus>> = {
  'email.sent': 'sent',
  'email.delivered': 'delivered',
  'email.opened': 'opened',
  'email.clicked': 'clicked',
  'email.bounced': 'bounced',
  'email.complained': 'complained',
};

/** opened and clicked count people, as email analytics do: a machine's hit has counters of its own. */
function countedAs(event: BusEvent): CountedStatus | undefined {
  const status = COUNTED[event.type];
  if (status !== 'opened' && status !== 'clicked') return status;
  return isMachineHit(event) ? (status === 'opened' ? 'machine_opened' : 'machine_clicked') : status;
}

export interface CampaignCountersDeps {
  campaigns: CampaignsRepository;
  contacts: Pick<ContactService, 'unsubscribe'>;
}

export function createCampaignCounters(deps: CampaignCountersDeps) {
  const { campaigns } = deps;
  return {
    /** Counters move once per email per status, as status events arrive. */
    async onEmailEvent(event: BusEvent): Promise<void> {
      const emailId = event.data.id;
      const status = countedAs(event);
      if (!status || !event.data.campaignId || typeof emailId !== 'string') return;
      // Each write counts or unsubscribes once however often it runs, so one whose store
      // connection was cut is tried again (core/connection-retry.ts): given up, the count would
      // stay missing until a restart recounts.
      await retryOnConnectionLoss(() => campaigns.countStatus(emailId, status));
      const hard = event.type === 'email.bounced' && (event.data.bounce as { type?: string } | undefined)?.type === 'Permanent';
      if (hard) await retryOnConnectionLoss(() => campaigns.countStatus(emailId, 'hard_bounced'));
      // A campaign contact whose mailbox is gone, or who complained, is unsubscribed from the
      // book too, so no later campaign tries them again (suppression covers sends as well).
      const contactId = event.data.contactId;
      if (typeof contactId !== 'string') return;
      if (hard) await retryOnConnectionLoss(() => deps.contacts.unsubscribe(event.teamId, contactId, 'BOUNCED'));
      if (event.type === 'email.complained') await retryOnConnectionLoss(() => deps.contacts.unsubscribe(event.teamId, contactId, 'COMPLAINED'));
    },

    /**
     * At startup: counters a killed process never moved (its status events were committed,
     * the counting after them was not) are counted now from the stored events. Counting is
     * once per email and status, so this never counts twice, also next to live counting.
     * Also when the cluster finds a node dead; `stop` ends it between chunks (a graceful stop).
     */
    async recoverCounts(stop?: () => boolean): Promise<number> {
      let added = 0;
      for (let after: number | null = 0; after !== null && !stop?.(); ) {
        const chunk = await campaigns.recountMissed(after, RECOUNT_CHUNK);
        added += chunk.added;
        after = chunk.last;
      }
      return added;
    },
  };
}
