import { domainToASCII } from 'node:url';

// Frozen with the migrations that use it (20261129050000, 20261129060000, 20261129070000):
// addressKey, asciiDomain and normalizeAddress (core/emails/addresses.ts) as they were when
// they were written. A later change of a rule gets a copy of its own and a migration of its
// own; what is here never changes.

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

/**
 * A domain as asciiDomain (core/emails/addresses.ts) keys it: lowercased, an IDN in A-labels;
 * a name that is no valid IDN stays as it is (lowercased).
 */
export function domainKey(domain: string): string {
  const lower = domain.toLowerCase();
  return (ASCII.test(lower) ? lower : domainToASCII(lower)) || lower;
}

/** An address as normalizeAddress keeps it: the local part as given, the domain by domainKey. */
export function addressWithDomainKey(address: string): string {
  const at = address.lastIndexOf('@');
  return at < 0 ? address : `${address.slice(0, at)}@${domainKey(address.slice(at + 1))}`;
}
