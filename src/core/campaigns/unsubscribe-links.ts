import type { CampaignsRepository } from '../../store/repositories/campaigns-repository.js';
import type { ContactService } from '../contacts/contact-service.js';
import { substituteVariables } from '../../render/variables.js';
import { signUnsubscribeToken, verifyUnsubscribeToken } from './unsubscribe-token.js';

// What a campaign's unsubscribe link does: the page's view of it (GET, which link scanners
// fetch, so it changes nothing), the unsubscribe (the page's button or a mail client's RFC 8058
// one-click POST) and its undoing ("Subscribe again", a POST from the page after it). A link
// names a campaign and a contact; it works after either is deleted or the contact merged.

export interface UnsubscribeLinksDeps {
  campaigns: CampaignsRepository;
  contacts: Pick<ContactService, 'unsubscribe' | 'resubscribe' | 'findInBook'>;
  secret: string;
  publicUrl: string;
}

export function createUnsubscribeLinks(deps: UnsubscribeLinksDeps) {
  const { campaigns } = deps;
  return {
    /** The unsubscribe page's view of a token. Changes nothing (link scanners fetch with GET). */
    async unsubscribeState(token: string) {
      const parsed = verifyUnsubscribeToken(deps.secret, token);
      if (!parsed) return null;
      const c = await campaigns.findByIdAnyTeam(parsed.campaignId);
      if (!c) return null;
      // The subject as this reader got it; the campaign's is a template ("Hello {{firstName}}").
      const sent = await campaigns.recipientEmail(c.id, parsed.contactId);
      const subject = sent?.subject || substituteVariables(c.subject, {}, { escapeHtml: false });
      return { campaign: c, contactId: parsed.contactId, subject };
    },

    /** POST on the link (or a mail client's RFC 8058 one-click POST): unsubscribes at once. */
    async unsubscribe(token: string): Promise<boolean> {
      const parsed = verifyUnsubscribeToken(deps.secret, token);
      if (!parsed) return false;
      const c = await campaigns.findByIdAnyTeam(parsed.campaignId);
      if (!c) return false;
      const contact = await deps.contacts.unsubscribe(c.team_id, parsed.contactId, 'UNSUBSCRIBED');
      if (contact) {
        // The contact's id, not the link's: a link may name a contact since merged into this one.
        await campaigns.countUnsubscribe(c.id, contact.id);
        return true;
      }
      // The contact was deleted since. Its address may be in the book again (imported anew, under
      // another id): that contact is the person who clicked. If it is not, nothing goes to the
      // address from this book any more, which is what the reader asked for.
      const address = (await campaigns.recipientEmail(c.id, parsed.contactId))?.address;
      if (address === undefined) return false;
      const again = await deps.contacts.findInBook(c.team_id, c.contact_book_id, address);
      if (again && (await deps.contacts.unsubscribe(c.team_id, again.id, 'UNSUBSCRIBED'))) await campaigns.countUnsubscribe(c.id, parsed.contactId);
      return true;
    },

    /**
     * The page's "Subscribe again" (a POST): undoes the reader's own unsubscribe. Null for a
     * link that is not valid; false when there is nothing this link may undo (the address
     * bounced or complained, or is no longer in the book).
     */
    async resubscribe(token: string): Promise<boolean | null> {
      const parsed = verifyUnsubscribeToken(deps.secret, token);
      if (!parsed) return null;
      const c = await campaigns.findByIdAnyTeam(parsed.campaignId);
      if (!c) return null;
      let contact = await deps.contacts.resubscribe(c.team_id, parsed.contactId);
      if (!contact) {
        // Deleted since: the address may be in the book again, under another id (as for unsubscribe).
        const address = (await campaigns.recipientEmail(c.id, parsed.contactId))?.address;
        const again = address === undefined ? undefined : await deps.contacts.findInBook(c.team_id, c.contact_book_id, address);
        contact = again && (await deps.contacts.resubscribe(c.team_id, again.id));
      }
      return contact?.subscribed === true;
    },

    unsubscribeUrl(campaignId: string, contactId: string): string {
      return `${deps.publicUrl}/unsubscribe/${signUnsubscribeToken(deps.secret, campaignId, contactId)}`;
    },
  };
}
