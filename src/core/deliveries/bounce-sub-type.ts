/**
 * A bounce's subType, in the words of the usesend/SES webhook payload the SDK's users already
 * parse (bounce.subType: General, NoEmail, MailboxFull, MessageTooLarge, ContentRejected), plus
 * Policy for a refusal about us (policy, blocklist), which SES has no word for.
 */
export function bounceSubType(r: { category?: string | undefined; response: string }): string {
  switch (r.category) {
    case 'recipient':
      return 'NoEmail';
    case 'mailbox-full':
      return 'MailboxFull';
    case 'message':
      return /\b5\.3\.4\b|size|too (?:large|big)|exceeds/i.test(r.response) ? 'MessageTooLarge' : 'ContentRejected';
    case 'spam':
      return 'ContentRejected';
    case 'policy':
    case 'blocklist':
    case 'sender':
      return 'Policy';
    default:
      return 'General';
  }
}
