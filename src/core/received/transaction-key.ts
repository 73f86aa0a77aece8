import { createHash } from 'node:crypto';

// What makes a message retried by its sender (RFC 5321 4.5.4.1: after our 4xx, or when our 250
// was lost) recognisable as the same one: the same message bytes from the same MAIL FROM to the
// same recipients. A retry repeats all three; two different messages never share the bytes
// (Date, Message-ID, the reporter's ids differ). The recipients are part of it because a sender
// may split one message's recipients over several transactions (a 452 at RCPT, Bcc copies):
// those are different deliveries, each kept.

/** Hex SHA-256 of the message bytes as received (before our trace fields). */
export function messageDigest(raw: Buffer): string {
  return createHash('sha256').update(raw).digest('hex');
}

/** The key of one stored row: MAIL FROM, the envelope recipients it was stored for, and the message. */
export function transactionKey(mailFrom: string, rcptTo: readonly string[], digest: string): string {
  return createHash('sha256')
    .update(JSON.stringify([mailFrom, [...rcptTo].sort(), digest]))
    .digest('hex');
}
