import type { DomainRecord } from '../../store/repositories/domains-repository.js';

/**
 * Which domains act for a name (its mail, its MTA-STS policy), given every live domain of that
 * name, receiving or not. Several teams may hold the name, and verification proves each one's own
 * DKIM key. Only receiving domains act (receiving can only be turned on once verified): the
 * verified ones if any; otherwise, since a DNS lapse must not bounce mail, each receiving one
 * whose lapse no other team's verification came after. A team verified after another's lapse
 * holds the name now (it passed to them), so the lapsed team gets none of their mail, even while
 * their records lapse too; teams that lapse together all keep receiving. An unknown time (null)
 * rules nobody out.
 */
export function receivingOwners(named: readonly DomainRecord[]): DomainRecord[] {
  const live = named.filter((d) => d.receiving);
  const verified = live.filter((d) => d.status === 'SUCCESS');
  if (verified.length) return verified;
  const verifiedAfter = (x: DomainRecord, y: DomainRecord) =>
    y.teamId !== x.teamId && y.verifiedAt !== null && x.unverifiedSince !== null && Date.parse(y.verifiedAt) > Date.parse(x.unverifiedSince);
  return live.filter((x) => !named.some((y) => verifiedAfter(x, y)));
}
