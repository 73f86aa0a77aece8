import { generateKeyPair } from 'node:crypto';
import { poolOf } from '../teams/team-service.js';
import { promisify } from 'node:util';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { DnsResolver } from '../../lib/dns/dns-client.js';
import type { DomainRecord, DomainsRepository, DomainStatus, MtaStsMode } from '../../store/repositories/domains-repository.js';
import { AppError, badRequest, forbidden, notFound, notUnique } from '../errors.js';
import { isIntId } from '../int-id.js';
import type { BusEvent, EventBus, DomainEventType } from '../events.js';
import type { AuditService, OperatorActor } from '../operators/audit-service.js';
import { bounceHost, buildDnsRecords, dkimHost, isLocalHostname, mtaStsPolicyHost, mtaStsTxtHost, tlsRptHost, localHostnameWarning, servedStsPolicy, type DnsRecordView } from './dns-records.js';
import { canonicalHost, isSameOrSubdomain, normalizeDomainName } from './domain-names.js';
import { asciiDomain } from '../emails/addresses.js';
import { checkDomainDns, type RecordCheck } from './domain-verifier.js';
import { receivingOwners } from './name-owners.js';
import { pickDkimSelector, suffixedSelector } from './dkim-selectors.js';
import { isUniqueViolation } from '../../store/store-errors.js';

/** A sending domain as core hands it to the edges (the outbound engine, the inbound listener). */
export type { DomainRecord } from '../../store/repositories/domains-repository.js';

const generateKeyPairAsync = promisify(generateKeyPair);

/** A domain unverified this long turns FAILED (it keeps being re-checked). */
export const VERIFY_GIVE_UP_MS = 72 * 60 * 60 * 1000;
/**
 * Longer than any DNS check runs: its lookups go in parallel, each bounded by the DNS client's
 * timeouts (dns.timeoutMs per try, seconds in all), at most three rounds. A verifying flag older
 * than this was left by a process that died during its check (a cluster node; the one node of
 * SQLite clears them at start), and reads as not verifying.
 */
export const VERIFYING_STALE_MS = 10 * 60_000;
const DKIM_KEY_BITS = 2048;
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** A new domain's DKIM key: the DER SubjectPublicKeyInfo (the p= of its record) and the private key, PKCS#8 PEM. */
export interface DkimKeyPair {
  publicKeyDer: Buffer;
  privateKeyPem: string;
}

/** A fresh RSA key of DKIM_KEY_BITS for each domain (made on the thread pool: ~0.1-0.5 s of CPU each). */
export async function generateDkimKeyPair(): Promise<DkimKeyPair> {
  const { publicKey, privateKey } = await generateKeyPairAsync('rsa', {
    modulusLength: DKIM_KEY_BITS,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { publicKeyDer: publicKey as unknown as Buffer, privateKeyPem: privateKey as unknown as string };
}

/** What the caller may see: a key bound to a domain sees only that domain. */
export interface DomainScope {
  teamId: number;
  domainId: number | null;
}

export interface DomainView {
  id: number;
  name: string;
  teamId: number;
  status: DomainStatus;
  region: string;
  clickTracking: boolean;
  openTracking: boolean;
  trackingDomain: string | null;
  trackingDomainStatus: DomainStatus | null;
  tlsPolicy: 'OPPORTUNISTIC' | 'ENFORCED';
  receiving: boolean;
  mtaStsMode: MtaStsMode;
  publicKey: string;
  dkimStatus: DomainStatus | null;
  spfDetails: DomainStatus | null;
  createdAt: string;
  updatedAt: string;
  dmarcAdded: boolean;
  isVerifying: boolean;
  errorMessage: string | null;
  subdomain: string | null;
  verificationError: string | null;
  lastCheckedTime: string | null;
  dnsRecords: DnsRecordView[];
}

export interface DomainPatchInput {
  clickTracking?: boolean;
  openTracking?: boolean;
  trackingDomain?: string | null;
  tlsPolicy?: 'OPPORTUNISTIC' | 'ENFORCED';
  receiving?: boolean;
  mtaStsMode?: MtaStsMode;
}

export interface DomainServiceDeps {
  /** Whether an egress pool of that name is configured (outbound.pools). */
  isPool?: (name: string) => boolean;
  domains: DomainsRepository;
  resolver: DnsResolver;
  clock: Clock;
  events: EventBus;
  logger: Logger;
  hostname: string;
  dkimSelector: string;
  bounceLabel: string;
  /** Sandbox mode: a domain may send before it is verified (nothing leaves the server). */
  sandbox?: boolean;
  /** The operator audit log: an operator's change and its entry commit together. */
  audit?: Pick<AuditService, 'inTransaction'>;
  /** Where new domains' DKIM keys come from (generateDkimKeyPair; the tests hand out keys made once). */
  dkimKeyPair?: () => Promise<DkimKeyPair>;
}

/**
 * Why an unverified domain may not send, in plain words: what to publish and how to check it.
 * A TEMPORARY_FAILURE status is about the last DNS check, not about sending, so it is not
 * reported as if the send had failed for a while.
 */
function notVerifiedMessage(d: DomainRecord): string {
  const howToFix = `publish the DNS records listed by GET /v1/domains/${d.id}, then check them with PUT /v1/domains/${d.id}/verify or posthorn domains verify ${d.name} (or, to try sending without DNS, sandbox mode: POSTHORN_SANDBOX=true for the server, and for posthorn send too)`;
  if (d.status === 'FAILED') return `domain ${d.name} is not verified: its DNS records were not found within 72 hours; ${howToFix}`;
  if (d.status === 'TEMPORARY_FAILURE') return `domain ${d.name} is not verified yet (its last DNS check could not complete: lookups failed or timed out); ${howToFix}`;
  return `domain ${d.name} is not verified yet; ${howToFix}`;
}

function worst(...checks: RecordCheck[]): DomainStatus {
  const order: DomainStatus[] = ['TEMPORARY_FAILURE', 'FAILED', 'PENDING', 'NOT_STARTED', 'SUCCESS'];
  return order.find((s) => checks.some((c) => c.status === s)) ?? 'SUCCESS';
}

export function createDomainService(deps: DomainServiceDeps) {
  const { domains, clock, events } = deps;

  function view(d: DomainRecord): DomainView {
    return {
      id: d.id,
      name: d.name,
      teamId: d.teamId,
      status: d.status,
      region: d.region,
      clickTracking: d.clickTracking,
      openTracking: d.openTracking,
      trackingDomain: d.trackingDomain,
      trackingDomainStatus: d.trackingDomain ? d.trackingDomainStatus : null,
      tlsPolicy: d.tlsPolicy,
      receiving: d.receiving,
      mtaStsMode: d.mtaStsMode,
      publicKey: d.publicKey,
      dkimStatus: d.dkimStatus,
      spfDetails: d.spfStatus,
      createdAt: d.createdAt,
      updatedAt: d.updatedAt,
      dmarcAdded: d.dmarcAdded,
      isVerifying: d.isVerifying && d.verifyingSince !== null && clock.nowMs() - Date.parse(d.verifyingSince) < VERIFYING_STALE_MS,
      errorMessage: d.errorMessage,
      subdomain: d.subdomain,
      verificationError: d.verificationError,
      lastCheckedTime: d.lastCheckedAt,
      dnsRecords: buildDnsRecords(d, deps.hostname),
    };
  }

  /**
   * Runs a domain write whose result calls for events: they are written to the outbox inside
   * the write's transaction (a kill right after the commit loses none) and emitted after it.
   */
  async function announced<T>(write: (inTransaction: (result: T) => void) => Promise<T>, eventsFor: (result: T) => BusEvent[]): Promise<T> {
    let list: BusEvent[] = [];
    const result = await write((r) => {
      list = eventsFor(r);
      events.inTransaction(list);
    });
    for (const e of list) events.emit(e);
    return result;
  }

  function domainEvent(type: DomainEventType, d: DomainRecord): BusEvent {
    const v = view(d);
    return {
      type,
      teamId: d.teamId,
      domainId: d.id,
      occurredAt: clock.now().toISOString(),
      data: {
        id: v.id,
        name: v.name,
        status: v.status,
        region: v.region,
        createdAt: v.createdAt,
        updatedAt: v.updatedAt,
        clickTracking: v.clickTracking,
        openTracking: v.openTracking,
        subdomain: v.subdomain,
        dkimStatus: v.dkimStatus,
        spfDetails: v.spfDetails,
        dmarcAdded: v.dmarcAdded,
      },
    };
  }

  /** Reads: a domain outside the scope is simply not there (404). */
  async function load(scope: DomainScope, id: number): Promise<DomainRecord> {
    const d = (scope.domainId !== null && scope.domainId !== id) || !isIntId(id) ? undefined : await domains.findById(scope.teamId, id);
    if (!d) throw notFound(`domain ${id} not found`);
    return d;
  }

  /** Writes: a domain outside the key's domain is refused (403); an unknown one is 404. */
  async function loadForWrite(scope: DomainScope, id: number): Promise<DomainRecord> {
    if (scope.domainId !== null && scope.domainId !== id) {
      throw forbidden(`this API key is restricted to domain ${scope.domainId}`);
    }
    return load(scope, id);
  }

  function normalizeTrackingDomain(d: DomainRecord, input: string): string {
    const host = canonicalHost(input);
    const full = host.includes('.') ? host : `${host}.${d.name}`;
    if (!isSameOrSubdomain(full, d.name) || full === d.name) {
      throw badRequest(`trackingDomain: must be a subdomain of ${d.name}, given in full or as its label only`);
    }
    if (!full.slice(0, -(d.name.length + 1)).split('.').every((l) => LABEL.test(l))) {
      throw badRequest(`trackingDomain: "${input}" is not a valid host name`);
    }
    return full;
  }

  /** What each host a domain with this selector asks records for puts before its name (receiving's included). */
  const recordHostPrefixes = (dkimSelector: string) => [
    dkimHost({ dkimSelector, name: '' }),
    bounceHost({ bounceLabel: deps.bounceLabel, name: '' }),
    mtaStsTxtHost({ name: '' }),
    mtaStsPolicyHost({ name: '' }),
    tlsRptHost({ name: '' }),
    '_dmarc.',
  ];

  /** The DKIM selectors a new domain of this name must not use (dkim-selectors.ts): its other holders'. */
  async function selectorsTaken(name: string, exceptId?: number): Promise<string[]> {
    const taken = (await domains.dkimSelectorsOfName(name)).filter((o) => o.id !== exceptId).map((o) => o.dkimSelector);
    // The server's own mail is signed at <selector>._domainkey.<hostname> (server-dkim-key.ts).
    if (canonicalHost(deps.hostname) === name) taken.push(deps.dkimSelector);
    return taken;
  }

  /**
   * Two teams adding one name at once each pick a selector before the other's row exists. Each
   * checks after its insert: one that finds another holder with its selector moves to a fresh
   * one (both may; the later commit always sees the earlier). Nobody has published anything yet.
   */
  async function ownSelector(d: DomainRecord): Promise<DomainRecord> {
    const taken = await selectorsTaken(d.name, d.id);
    if (!taken.some((s) => s.toLowerCase() === d.dkimSelector.toLowerCase())) return d;
    const dkimSelector = pickDkimSelector(suffixedSelector(deps.dkimSelector), taken);
    return (await domains.update(d.id, { dkimSelector, updatedAt: clock.now().toISOString() })) ?? d;
  }

  /** The settings a DNS check depends on that a PATCH can change. */
  const checkedSettings = (d: DomainRecord) => `${d.trackingDomain ?? ''}\u0000${d.receiving}`;

  /**
   * Runs the DNS check and stores each record's status and the domain's status. The statuses are
   * stored only for the settings they were checked against: a re-check reads its list before its
   * checks run, and a PATCH (a tracking domain, receiving turned on) may land during the lookups;
   * the check written from the older settings would blank the new ones' statuses. Undefined when
   * the domain was deleted meanwhile (the lookups can take seconds): there is nothing to store.
   */
  async function runCheck(given: DomainRecord): Promise<DomainRecord | undefined> {
    let d = (await domains.findByIdAnyTeam(given.id)) ?? given;
    await domains.update(d.id, { isVerifying: true, verifyingSince: clock.now().toISOString() });
    let check = await checkDomainDns(deps.resolver, d, deps.hostname);
    for (let tries = 1; tries < 3; tries++) {
      const current = await domains.findByIdAnyTeam(d.id);
      if (!current || checkedSettings(current) === checkedSettings(d)) break;
      d = current;
      check = await checkDomainDns(deps.resolver, d, deps.hostname);
    }
    const now = clock.now();
    const required = [check.dkim, check.spf, check.mx];
    const requiredStatus = worst(...required);
    const problems = [check.dkim, check.spf, check.mx, check.tracking, check.receivingMx]
      .filter((c): c is RecordCheck => !!c && c.status !== 'SUCCESS')
      .map((c) => c.problem!);
    /** The domain's status after this check, from the status it had before. */
    const decide = (before: DomainRecord): { status: DomainStatus; unverifiedSince: string | null } => {
      if (requiredStatus === 'SUCCESS') return { status: 'SUCCESS', unverifiedSince: null };
      if (requiredStatus === 'TEMPORARY_FAILURE' && before.status === 'SUCCESS' && required.every((c) => c.status === 'SUCCESS' || c.status === 'TEMPORARY_FAILURE')) {
        // A verified domain is not taken out of service by a flaky resolver: only records that
        // are really gone or wrong revoke SUCCESS.
        return { status: 'SUCCESS', unverifiedSince: before.unverifiedSince };
      }
      const unverifiedSince = before.unverifiedSince ?? now.toISOString();
      if (requiredStatus === 'TEMPORARY_FAILURE') return { status: 'TEMPORARY_FAILURE', unverifiedSince };
      return { status: now.getTime() - Date.parse(unverifiedSince) >= VERIFY_GIVE_UP_MS ? 'FAILED' : 'PENDING', unverifiedSince };
    };
    let status: DomainStatus;
    let updated: DomainRecord | undefined;
    for (let round = 1; ; round++) {
      const decided = decide(d);
      status = decided.status;
      const before = d;
      // Stored only if no other check (a second verify, the scheduled re-check) changed the
      // status since it was read, so each change is announced once (on PostgreSQL the second
      // waits for the first's commit here); the last round stores it whatever the status.
      updated = await announced<DomainRecord | undefined>((inTx) => domains.update(d.id, {
        status,
        dkimStatus: check.dkim.status,
        spfStatus: worst(check.spf, check.mx) === 'SUCCESS' ? 'SUCCESS' : check.spf.status !== 'SUCCESS' ? check.spf.status : check.mx.status,
        mxStatus: check.mx.status,
        // FAILED (two records: no policy) shows on the record; a missing one stays NOT_STARTED
        dmarcStatus: check.dmarc.status === 'SUCCESS' || check.dmarc.status === 'FAILED' ? check.dmarc.status : 'NOT_STARTED',
        dmarcAdded: check.dmarc.status === 'SUCCESS',
        trackingDomainStatus: check.tracking?.status ?? null,
        receivingMxStatus: check.receivingMx?.status ?? null,
        mtaStsStatus: check.mtaSts?.status ?? null,
        mtaStsHostStatus: check.mtaStsHost?.status ?? null,
        tlsRptStatus: check.tlsRpt?.status ?? null,
        isVerifying: false,
        errorMessage: status === 'SUCCESS' ? null : status === 'FAILED' ? 'Domain records were not found for 72 hours' : status === 'TEMPORARY_FAILURE' ? 'DNS lookups failed temporarily' : null,
        verificationError: problems.length ? problems.join('; ') : null,
        lastCheckedAt: now.toISOString(),
        // Also when a DNS failure keeps SUCCESS; unchanged otherwise (name-owners.ts compares it
        // with other teams' lapses).
        verifiedAt: status === 'SUCCESS' ? now.toISOString() : undefined,
        unverifiedSince: decided.unverifiedSince,
        updatedAt: now.toISOString(),
      }, inTx, round < 3 ? before.status : undefined), (u) => {
        if (!u) return [];
        if (u.status === 'SUCCESS' && before.status !== 'SUCCESS') return [domainEvent('domain.verified', u)];
        return u.status !== before.status ? [domainEvent('domain.updated', u)] : [];
      });
      if (updated || round >= 3) break;
      const current = await domains.findByIdAnyTeam(d.id);
      if (!current) break;
      d = { ...d, status: current.status, unverifiedSince: current.unverifiedSince };
    }
    if (!updated) {
      deps.logger.debug({ event: 'domain.verification_skipped', domainId: d.id, teamId: d.teamId, domain: d.name }, `domain ${d.name} was deleted during its check`);
      return undefined;
    }
    deps.logger.info(
      {
        event: 'domain.verification',
        domainId: d.id,
        teamId: d.teamId,
        domain: d.name,
        status,
        previousStatus: d.status,
        records: { dkim: check.dkim.status, spf: check.spf.status, mx: check.mx.status, dmarc: check.dmarc.status },
        ...(problems.length ? { problems } : {}),
      },
      `domain ${d.name} checked: ${status}`,
    );
    return updated;
  }

  return {
    view,

    async create(scope: DomainScope, input: { name: string; region: string }): Promise<DomainView> {
      if (scope.domainId !== null) throw forbidden('an API key restricted to one domain cannot add domains');
      const { name, subdomain } = normalizeDomainName(input.name);
      if (await domains.findByName(scope.teamId, name)) throw notUnique(`domain ${name} already exists in this team`);
      const dkimSelector = pickDkimSelector(deps.dkimSelector, await selectorsTaken(name));
      // Every host the domain asks records for is a DNS name too (at most 253 characters): a
      // longer one could never be published, and the domain would wait for it to the end.
      const room = 253 - Math.max(...recordHostPrefixes(dkimSelector).map((p) => p.length));
      if (name.length > room) throw badRequest(`name: must be at most ${room} characters, so that every host to publish records at (${dkimHost({ dkimSelector, name: '<name>' })} the longest) is a DNS name`);
      const { publicKeyDer, privateKeyPem } = await (deps.dkimKeyPair ?? generateDkimKeyPair)();
      const now = clock.now().toISOString();
      let d: DomainRecord;
      try {
        d = await announced((inTx) => domains.insert({
          teamId: scope.teamId,
          name,
          region: input.region,
          status: 'PENDING',
          subdomain,
          dkimSelector,
          dkimPrivateKey: privateKeyPem,
          publicKey: publicKeyDer.toString('base64'),
          bounceLabel: deps.bounceLabel,
          dkimStatus: 'NOT_STARTED',
          spfStatus: 'NOT_STARTED',
          mxStatus: 'NOT_STARTED',
          dmarcStatus: 'NOT_STARTED',
          dmarcAdded: false,
          clickTracking: false,
          openTracking: false,
          trackingDomain: null,
          trackingDomainStatus: null,
          tlsPolicy: 'OPPORTUNISTIC',
          receiving: false,
          receivingMxStatus: null,
          mtaStsMode: 'testing',
          mtaStsStatus: null,
          mtaStsHostStatus: null,
          tlsRptStatus: null,
          isVerifying: false,
          verifyingSince: null,
          errorMessage: null,
          verificationError: null,
          lastCheckedAt: null,
          verifiedAt: null,
          unverifiedSince: now,
          createdAt: now,
          updatedAt: now,
        }, inTx), (created) => [domainEvent('domain.created', created)]);
      } catch (err) {
        // Two concurrent creates of the same name: the partial unique index decides.
        if (isUniqueViolation(err, 'domains')) throw notUnique(`domain ${name} already exists in this team`);
        throw err;
      }
      d = await ownSelector(d);
      if (isLocalHostname(deps.hostname)) {
        deps.logger.warn({ event: 'domain.localhost_records', domainId: d.id, teamId: d.teamId, domain: d.name, hostname: deps.hostname }, `domain ${d.name} added, but ${localHostnameWarning(deps.hostname, deps.sandbox)}`);
      }
      return view(d);
    },

    async list(scope: DomainScope): Promise<DomainView[]> {
      return (await domains.list(scope.teamId, scope.domainId)).map(view);
    },

    async get(scope: DomainScope, id: number): Promise<DomainView> {
      return view(await load(scope, id));
    },

    /**
     * PUT /domains/{id}/verify: checks DNS now and reports the outcome. A write (it moves the
     * status and announces domain.verified), so a key bound to another domain is 403 (spec,
     * Domains: "403 if the key lacks access").
     */
    async verify(scope: DomainScope, id: number): Promise<{ message: string; domain: DomainView }> {
      const d = await runCheck(await loadForWrite(scope, id));
      if (!d) throw notFound(`domain ${id} not found`);
      const message =
        d.status === 'SUCCESS'
          ? 'Domain verified: all required DNS records were found'
          : `Domain verification finished with status ${d.status}${d.verificationError ? `: ${d.verificationError}` : ''}`;
      return { message, domain: view(d) };
    },

    async update(scope: DomainScope, id: number, patch: DomainPatchInput): Promise<DomainView> {
      const d = await loadForWrite(scope, id);
      const now = clock.now().toISOString();
      const changes: Parameters<DomainsRepository['update']>[1] = { updatedAt: now };
      if (patch.clickTracking !== undefined) changes.clickTracking = patch.clickTracking;
      if (patch.openTracking !== undefined) changes.openTracking = patch.openTracking;
      if (patch.tlsPolicy !== undefined) changes.tlsPolicy = patch.tlsPolicy;
      if (patch.trackingDomain !== undefined) {
        if (patch.trackingDomain === null) {
          changes.trackingDomain = null;
          changes.trackingDomainStatus = null;
        } else {
          const host = normalizeTrackingDomain(d, patch.trackingDomain);
          if (host !== d.trackingDomain) {
            changes.trackingDomain = host;
            // Tracking moves to this host only once its CNAME resolves (spec, Domain rule 4).
            changes.trackingDomainStatus = 'PENDING';
          }
        }
      }
      if (patch.receiving !== undefined) {
        if (patch.receiving && d.status !== 'SUCCESS') {
          throw badRequest(`receiving: domain ${d.name} must be verified before receiving can be turned on`);
        }
        changes.receiving = patch.receiving;
        if (patch.receiving !== d.receiving) {
          const pending = patch.receiving ? 'PENDING' : null;
          Object.assign(changes, { receivingMxStatus: pending, mtaStsStatus: pending, mtaStsHostStatus: pending, tlsRptStatus: pending });
        }
      }
      if (patch.mtaStsMode !== undefined && patch.mtaStsMode !== d.mtaStsMode) {
        changes.mtaStsMode = patch.mtaStsMode;
        // The policy id changes with the mode: the TXT record must be published again.
        if ((patch.receiving ?? d.receiving) && d.mtaStsStatus !== null) changes.mtaStsStatus = 'PENDING';
      }
      const updated = await announced<DomainRecord | undefined>((inTx) => domains.update(d.id, changes, inTx), (u) => (u ? [domainEvent('domain.updated', u)] : []));
      if (!updated) throw notFound(`domain ${id} not found`);
      return view(updated);
    },

    async remove(scope: DomainScope, id: number): Promise<{ id: number; success: boolean; message: string }> {
      const d = await loadForWrite(scope, id);
      const nowIso = clock.now().toISOString();
      const deleted = await announced(
        (inTx) => domains.softDelete(scope.teamId, d.id, nowIso, inTx),
        (ok) => (ok ? [domainEvent('domain.deleted', { ...d, updatedAt: nowIso })] : []),
      );
      if (!deleted) throw notFound(`domain ${id} not found`);
      return { id: d.id, success: true, message: 'Domain deleted successfully' };
    },

    /**
     * Cron: re-check every unverified (or every verified) domain; one failure never stops the
     * rest. Once `signal` aborts (a graceful stop) no further domain is started: the one under
     * way is finished and recorded. `checkedSince`: a run carried on from a node that stopped
     * partway skips the domains checked since then. Returns how many were checked.
     */
    async recheck(verified: boolean, signal?: AbortSignal, checkedSince?: Date): Promise<number> {
      const list = await domains.listForRecheck(verified);
      let checked = 0;
      for (const d of list) {
        if (signal?.aborted) break;
        if (checkedSince && d.lastCheckedAt && Date.parse(d.lastCheckedAt) >= checkedSince.getTime()) continue;
        checked++;
        try {
          await runCheck(d);
        } catch (err) {
          deps.logger.warn({ err, domain: d.name }, 'domain re-check failed');
          await domains.update(d.id, { isVerifying: false });
        }
      }
      return checked;
    },

    /** At start on SQLite (one node): no check can be under way; those a killed process left are not. */
    async clearChecksLeftBehind(): Promise<number> {
      return domains.clearVerifying();
    },

    /**
     * Operator: the egress pool of a domain's mail (null or "default": its team's). Returns the
     * domain as changed, undefined when there is no such domain.
     */
    /** With `by`, an operator's change: its domain.update audit entry commits with it. */
    async setPool(id: number, pool: string | null, by?: OperatorActor): Promise<{ id: number; name: string; teamId: number; pool: string | null } | undefined> {
      const value = poolOf(pool, deps.isPool);
      if (by && !deps.audit) throw new Error('domain service: no audit log wired for operator changes');
      const audit = by && deps.audit ? () => deps.audit!.inTransaction(by, 'domain.update', { domainId: id, pool: value }) : undefined;
      if (!(await domains.setPool(id, value, clock.now().toISOString(), audit))) return undefined;
      const d = await domains.findByIdAnyTeam(id);
      return d && { id: d.id, name: d.name, teamId: d.teamId, pool: d.pool };
    },

    /** For the CLI: find by id or name within a team (or any team when teamId is null: 400 if several hold the name). */
    async findForCli(teamId: number | null, idOrName: string): Promise<DomainRecord | undefined> {
      if (/^\d+$/.test(idOrName)) {
        // Past the ids' range is no domain (PostgreSQL would refuse the number itself).
        const d = isIntId(Number(idOrName)) ? await domains.findByIdAnyTeam(Number(idOrName)) : undefined;
        return d && (teamId === null || d.teamId === teamId) ? d : undefined;
      }
      const name = asciiDomain(canonicalHost(idOrName));
      const all = name ? await domains.findAllByName(name) : [];
      // Several teams may hold a name: without a team, acting on one of them would be a guess.
      const teams = [...new Set(all.map((d) => d.teamId))];
      if (teamId === null && teams.length > 1) throw badRequest(`${name} is a domain of several teams (${teams.join(', ')}): pass --team with the one meant, or give the domain's id`);
      return all.find((d) => teamId === null || d.teamId === teamId);
    },

    runCheck,

    /** The domain a team may send from, or the reason it may not (architecture.md, Decisions: errors). */
    /**
     * acceptedInSandbox false: mail accepted outside sandbox mode (a campaign scheduled there)
     * needs a verified domain on a server in sandbox mode too, as it would have when accepted.
     */
    async sendingDomain(scope: DomainScope, name: string, opts: { acceptedInSandbox?: boolean } = {}): Promise<DomainRecord> {
      const d = await domains.findByName(scope.teamId, canonicalHost(name));
      if (!d) throw new AppError('FORBIDDEN', `domain ${name} is not a domain of this team: add and verify it first`);
      if (scope.domainId !== null && scope.domainId !== d.id) throw forbidden(`this API key may only send from domain ${scope.domainId}`);
      if (d.status !== 'SUCCESS' && !(deps.sandbox && opts.acceptedInSandbox !== false)) throw forbidden(notVerifiedMessage(d));
      return d;
    },

    /**
     * The MTA-STS policy (RFC 8461 §3.2) served at https://mta-sts.<domain>/.well-known/mta-sts.txt
     * for a live receiving domain, or null. Any team's: the host name is public.
     */
    async servedMtaStsPolicy(policyHost: string): Promise<string | null> {
      const host = canonicalHost(policyHost);
      if (!host.startsWith('mta-sts.')) return null;
      // Several teams may have added the name: its owners (name-owners.ts), and among them the
      // one whose MX was verified.
      const candidates = receivingOwners(await domains.findAllByName(host.slice('mta-sts.'.length)));
      const d = candidates.find((c) => c.receivingMxStatus === 'SUCCESS') ?? candidates[0];
      return d ? servedStsPolicy(d.mtaStsMode, deps.hostname) : null;
    },

    async belongsToTeam(teamId: number, id: number): Promise<boolean> {
      return isIntId(id) && !!(await domains.findById(teamId, id));
    },
  };
}
export type DomainService = ReturnType<typeof createDomainService>;
