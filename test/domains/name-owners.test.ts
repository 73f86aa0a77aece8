import test from 'ava';
import { receivingOwners } from '../../src/core/domains/name-owners.js';
import type { DomainRecord } from '../../src/store/repositories/domains-repository.js';

// Who acts for a name several teams added, from their records alone (the protocol tests are in
// test/inbound/name-handover.test.ts).

let nextId = 1;
const at = (hour: number) => new Date(Date.UTC(2026, 10, 20, hour)).toISOString();

function domain(teamId: number, over: Partial<DomainRecord>): DomainRecord {
  const id = nextId++;
  return {
    id, teamId, name: 'example.com', region: 'local', status: 'SUCCESS', subdomain: null, dkimSelector: 's', dkimPrivateKey: 'k', publicKey: `p${id}`, bounceLabel: 'b',
    dkimStatus: null, spfStatus: null, mxStatus: null, dmarcStatus: null, dmarcAdded: false, clickTracking: false, openTracking: false, trackingDomain: null,
    trackingDomainStatus: null, tlsPolicy: 'OPPORTUNISTIC', receiving: true, receivingMxStatus: 'SUCCESS', mtaStsMode: 'testing', mtaStsStatus: null,
    mtaStsHostStatus: null, tlsRptStatus: null, isVerifying: false, verifyingSince: null, errorMessage: null, verificationError: null, lastCheckedAt: null,
    verifiedAt: null, unverifiedSince: null, createdAt: at(0), updatedAt: at(0), pool: null, ...over,
  };
}
/** Verified at `verified`, found without its records since `lapsed`. */
const lapsed = (teamId: number, verified: number | null, since: number, over: Partial<DomainRecord> = {}) =>
  domain(teamId, { status: 'PENDING', verifiedAt: verified === null ? null : at(verified), unverifiedSince: at(since), ...over });
const ids = (ds: DomainRecord[]) => ds.map((d) => d.id);

test('the verified receiving domains act, and only those', (t) => {
  const a = lapsed(1, 1, 2);
  const b = domain(2, { verifiedAt: at(3) });
  const c = domain(3, { verifiedAt: at(3), receiving: false });
  t.deepEqual(ids(receivingOwners([a, b, c])), [b.id]);
});

test('a lone team whose records lapsed still acts; one that never turned receiving on does not', (t) => {
  const a = lapsed(1, 1, 2);
  t.deepEqual(ids(receivingOwners([a])), [a.id]);
  t.deepEqual(receivingOwners([lapsed(1, 1, 2, { receiving: false })]), []);
});

test('none verified: a team that lapsed before another team verified the name does not act', (t) => {
  const a = lapsed(1, 1, 2);
  const b = lapsed(2, 3, 4);
  t.deepEqual(ids(receivingOwners([a, b])), [b.id]);
});

test('a team verified after the lapse rules it out even with receiving off', (t) => {
  const a = lapsed(1, 1, 2);
  t.deepEqual(receivingOwners([a, domain(2, { verifiedAt: at(3), receiving: false })]), []);
  t.deepEqual(receivingOwners([a, lapsed(2, 3, 4, { receiving: false })]), []);
});

test('teams that lapsed together, or a verification before the lapse, rule nobody out', (t) => {
  const a = lapsed(1, 1, 2);
  const b = lapsed(2, 1, 2);
  t.deepEqual(ids(receivingOwners([a, b])), [a.id, b.id]);
  const c = lapsed(1, 1, 3);
  t.deepEqual(ids(receivingOwners([c, domain(2, { verifiedAt: at(2), receiving: false })])), [c.id]);
});

test('an unknown verification time (null) rules nobody out', (t) => {
  const a = lapsed(1, 1, 2);
  const b = lapsed(2, null, 4);
  t.deepEqual(ids(receivingOwners([a, b])), [a.id, b.id]);
  t.deepEqual(ids(receivingOwners([a, domain(2, { verifiedAt: null, status: 'PENDING', receiving: false })])), [a.id]);
});
