import { domainToASCII } from 'node:url';

// Frozen with the migrations that use it (20261129050000, 20261129060000): addressKey
// (core/emails/addresses.ts) as it was when they were written. A later change of the rule gets
// a copy of its own and a migration of its own; this one never changes.

const ASCII = /^[\x00-\x7f]*$/;

/** Trimmed, lowercased, an internationalised domain in A-labels; a non-ASCII local part as it is. */
export function addressKey(address: string): string {
  const key = address.trim().toLowerCase();
  if (ASCII.test(key)) return key;
  const at = key.lastIndexOf('@');
  if (at < 0) return key;
  const domain = key.slice(at + 1);
  return `${key.slice(0, at)}@${(ASCII.test(domain) ? domain : domainToASCII(domain)) || domain}`;
}
