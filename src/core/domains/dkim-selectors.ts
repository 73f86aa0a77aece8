import { randomBytes } from 'node:crypto';

/**
 * Each DKIM key of a name needs a host of its own: with two keys published as TXT at one
 * <selector>._domainkey.<name>, receivers fetch either (RFC 6376 3.6.2.2) and one key's mail
 * fails at random. Several teams may add one name, and the server signs its own mail at
 * <selector>._domainkey.<hostname>, so a domain gets the server's selector only while nothing
 * else of that name holds it; otherwise the server's selector with a random suffix. The suffix
 * is random, not the team's id: it is published in DNS. Only the exact name matters: a
 * subdomain's keys live under its own name.
 */
const SUFFIX_BYTES = 4;
const MAX_LABEL = 63;

/** `<base>-<8 hex>`, a DNS label of at most 63 characters whatever the base's length. */
export function suffixedSelector(base: string, suffix = randomBytes(SUFFIX_BYTES).toString('hex')): string {
  return `${base.slice(0, MAX_LABEL - suffix.length - 1)}-${suffix}`;
}

/** The selector for a new domain, given those the name's other holders use (case-insensitive, as DNS). */
export function pickDkimSelector(base: string, taken: readonly string[]): string {
  const used = new Set(taken.map((s) => s.toLowerCase()));
  let selector = base;
  while (used.has(selector.toLowerCase())) selector = suffixedSelector(base);
  return selector;
}
