import { createHmac } from 'node:crypto';
import { addressKey } from '../emails/addresses.js';

// The VERP token of a return path: `<email id>_<tag>`, the tag a keyed MAC of the email and what
// its SMTP transaction carried. Everyone who got a copy sees the token, so a report sent to it
// (or quoting it) proves only that transaction's recipients; the key keeps a recipient from
// writing the token of another transaction. A transaction carries one recipient by default, and
// its tag names that recipient (recipientTag): a report on it covers that one delivery. A
// transaction that carries several (a shaping rule's maxRecipientsPerTransaction, or mail sent
// before per-recipient tags) has its recipient domain's tag (transactionTag): a report on it
// covers every recipient at that domain.

const TAG_LENGTH = 12;

/** Lowercase hex: MTAs that lowercase local parts leave it intact. */
export function transactionTag(secret: string, emailId: string, rcptDomain: string): string {
  return createHmac('sha256', secret).update(`verp\0${emailId}\0${rcptDomain.toLowerCase()}`).digest('hex').slice(0, TAG_LENGTH);
}

/** The tag of a transaction to one recipient, keyed on the address as deliveries are compared (addressKey). */
export function recipientTag(secret: string, emailId: string, recipient: string): string {
  return createHmac('sha256', secret).update(`verp-rcpt\0${emailId}\0${addressKey(recipient)}`).digest('hex').slice(0, TAG_LENGTH);
}

/** The token of a transaction to `recipient` alone, or (without it) to several recipients at `rcptDomain`. */
export function returnPathToken(secret: string, emailId: string, rcptDomain: string, recipient?: string): string {
  return `${emailId}_${recipient === undefined ? transactionTag(secret, emailId, rcptDomain) : recipientTag(secret, emailId, recipient)}`;
}

/** The email id part and the tag (null for a token without one: mail sent before tags). */
export function splitReturnPathToken(token: string): { emailToken: string; tag: string | null } {
  const m = new RegExp(`^(.+)_([0-9a-f]{${TAG_LENGTH}})$`, 'i').exec(token);
  return m ? { emailToken: m[1]!, tag: m[2]!.toLowerCase() } : { emailToken: token, tag: null };
}
