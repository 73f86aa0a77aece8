import { createHmac } from 'node:crypto';

// The VERP token of a return path: `<email id>_<tag>`, the tag a keyed MAC of the email and the
// recipient domain of its SMTP transaction. Everyone who got a copy sees the token, so a report
// sent to it (or quoting it) proves only that transaction's recipients; the key keeps a
// recipient at one domain from writing the token of another domain's transaction.

const TAG_LENGTH = 12;

/** Lowercase hex: MTAs that lowercase local parts leave it intact. */
export function transactionTag(secret: string, emailId: string, rcptDomain: string): string {
  return createHmac('sha256', secret).update(`verp\0${emailId}\0${rcptDomain.toLowerCase()}`).digest('hex').slice(0, TAG_LENGTH);
}

export function returnPathToken(secret: string, emailId: string, rcptDomain: string): string {
  return `${emailId}_${transactionTag(secret, emailId, rcptDomain)}`;
}

/** The email id part and the tag (null for a token without one: mail sent before tags). */
export function splitReturnPathToken(token: string): { emailToken: string; tag: string | null } {
  const m = new RegExp(`^(.+)_([0-9a-f]{${TAG_LENGTH}})$`, 'i').exec(token);
  return m ? { emailToken: m[1]!, tag: m[2]!.toLowerCase() } : { emailToken: token, tag: null };
}
