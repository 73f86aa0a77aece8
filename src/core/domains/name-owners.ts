import type { DomainRecord } from '../../store/repositories/domains-repository.js';

/**
 * Which of the live domains with receiving on for one name act for it (its mail, its MTA-STS
 * policy). The receiving flag decides (it can only be turned on for a verified domain): a
 * re-check that no longer finds a domain's records must not bounce its team's mail. But several
 * teams may hold the name, and verification proves each one's own DKIM key: once any of them is
 * verified, a team whose records are gone (the name passed to another team) no longer acts for
 * it, and gets none of the new owner's mail.
 */
export function receivingOwners(receiving: readonly DomainRecord[]): DomainRecord[] {
  const live = receiving.filter((d) => d.receiving);
  const verified = live.filter((d) => d.status === 'SUCCESS');
  return verified.length ? verified : live;
}
