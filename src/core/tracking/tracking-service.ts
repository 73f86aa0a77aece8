import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import { applyTracking } from '../../render/tracking-rewrite.js';
import type { DomainRecord } from '../../store/repositories/domains-repository.js';
import type { EmailRow, EmailsRepository } from '../../store/repositories/emails-repository.js';
import type { TrackingRepository } from '../../store/repositories/tracking-repository.js';
import { statusRank } from '../emails/email-status.js';
import type { EventBus } from '../events.js';
import { createTrackingTokens, MAX_TRACKING_TOKEN_CHARS } from './tracking-tokens.js';
import { emailBusEvent } from '../emails/email-bus-event.js';
import { canonicalHost } from '../domains/domain-names.js';
import { classifyHit, LINK_BURST_MS, type MachineVerdict } from './machine-hits.js';
import { networkMatcher } from '../../lib/network-list.js';

export interface TrackingServiceDeps {
  emails: EmailsRepository;
  tracking: TrackingRepository;
  events: EventBus;
  clock: Clock;
  logger: Logger;
  /** The app secret (HMAC key for tokens). */
  secret: string;
  /** The shared tracking host (POSTHORN_PUBLIC_URL), used when a domain has no working tracking domain. */
  publicUrl: string;
  /** tracking.machineWindowSeconds: a hit this soon after delivery is a machine's (0: rule off). */
  machineWindowSeconds: number;
  /** tracking.machineNetworks (checked by the config schema): a hit from one of them is a machine's. Default none. */
  machineNetworks?: readonly string[];
}

/** Who opened or clicked, as the HTTP edge saw it. */
export interface TrackingHit {
  token: string;
  userAgent: string | null;
  ip: string | null;
  /** The Host the request came in on (lowercase, no port). */
  host: string;
}

const MAX_USER_AGENT = 512;

/** List-Unsubscribe values are "<https://...>, <mailto:...>" (RFC 2369); the http(s) ones. */
function listUnsubscribeUrls(email: Pick<EmailRow, 'headers_json'>): Set<string> {
  if (!email.headers_json) return new Set();
  const headers = JSON.parse(email.headers_json) as Record<string, string>;
  const value = Object.entries(headers).find(([k]) => k.toLowerCase() === 'list-unsubscribe')?.[1] ?? '';
  // `<` is not part of a URL here: a run of `<http:` (no `>`) would otherwise be rescanned from each one.
  return new Set([...value.matchAll(/<\s*(https?:[^<>\s]+)\s*>/gi)].map((m) => m[1]!));
}

export function createTrackingService(deps: TrackingServiceDeps) {
  const tokens = createTrackingTokens(deps.secret);
  const shared = deps.publicUrl.replace(/\/+$/, '');
  const scheme = new URL(shared).protocol;
  const sharedHost = canonicalHost(new URL(shared).hostname);
  const fromMachineNetwork = networkMatcher(deps.machineNetworks ?? []);

  /** The domain's own tracking host once its CNAME verified (spec, Domain rule 4), else the shared one. */
  function trackingBase(domain: DomainRecord): string {
    if (domain.trackingDomain && domain.trackingDomainStatus === 'SUCCESS') return `${scheme}//${domain.trackingDomain}`;
    return shared;
  }

  /**
   * An unsubscribe link is never rewritten: it must work directly, in one step, from the
   * message (RFC 8058 practice, and what mailbox providers check), and a tracked redirect in
   * front of it would record scanners' prefetches as clicks on it.
   */
  function isUnsubscribeLink(url: string, listUnsubscribe: Set<string>): boolean {
    return listUnsubscribe.has(url) || /unsubscribe/i.test(url);
  }

  /**
   * A token's email, if the request's host may serve it: another domain's tracking host may not.
   * The shared host serves every link whichever domain names it as its tracking domain (any
   * team may add the shared host's parent domain and do so). The host is compared as stored
   * (canonicalHost): DNS takes `Track.Example.com.` to the same server as `track.example.com`,
   * and a spelling that matched no claim would pass as unclaimed.
   */
  async function emailFor(emailId: string, requestHost: string): Promise<{ email: EmailRow | undefined; hostOk: boolean }> {
    const host = canonicalHost(requestHost);
    const [email, owners] = await Promise.all([deps.emails.findByIdAnyTeam(emailId), host === sharedHost ? ([] as number[]) : deps.tracking.domainIdsForTrackingHost(host)]);
    const hostOk = owners.length === 0 || (email?.domain_id != null && owners.includes(email.domain_id));
    return { email, hostOk };
  }

  async function record(email: EmailRow, kind: 'OPENED' | 'CLICKED', detail: Record<string, unknown> & MachineVerdict): Promise<void> {
    const at = detail.timestamp as string;
    const type = kind === 'OPENED' ? 'email.opened' : 'email.clicked';
    const extra = kind === 'OPENED' ? { open: detail } : { click: detail };
    const event = emailBusEvent(type, email, kind, at, extra);
    // A machine's hit is kept as an event but leaves latestStatus alone (rank -1 never wins):
    // DELIVERED stays DELIVERED until a person opens or clicks.
    const rank = detail.machine ? -1 : statusRank(kind);
    // The webhook outbox rows are written in the same transaction as the email event.
    await deps.emails.recordEvents([{ emailId: email.id, status: kind, rank, data: detail, at }], () => deps.events.inTransaction([event]));
    deps.events.emit(event);
  }

  /** Machine or person, from the request and the email's own events (see machine-hits.ts). */
  async function verdict(email: EmailRow, userAgent: string | null, ip: string | null, nowMs: number, clickedUrl?: string): Promise<MachineVerdict> {
    const nowIso = new Date(nowMs).toISOString();
    const [delivered, recent] = await Promise.all([
      deps.tracking.lastDeliveredAt(email.id, nowIso),
      clickedUrl === undefined ? Promise.resolve([] as string[]) : deps.tracking.clickedUrlsSince(email.id, new Date(nowMs - LINK_BURST_MS).toISOString(), nowIso),
    ]);
    return classifyHit({
      userAgent,
      fromMachineNetwork: fromMachineNetwork(ip ?? undefined),
      nowMs,
      deliveredAtMs: delivered ? Date.parse(delivered) : null,
      windowMs: deps.machineWindowSeconds * 1000,
      otherLinkJustClicked: recent.some((u) => u !== clickedUrl),
    });
  }

  function who(hit: TrackingHit) {
    return { userAgent: hit.userAgent ? hit.userAgent.slice(0, MAX_USER_AGENT) : null, ip: hit.ip };
  }

  return {
    /**
     * The message factory's HTML hook: open pixel and tracked links, per the email's own choice
     * where it made one (1 or 0), else the domain's settings as they are now.
     */
    transformHtml(html: string, email: Pick<EmailRow, 'id' | 'headers_json' | 'open_tracking' | 'click_tracking'>, domain: DomainRecord): string {
      const openTracking = email.open_tracking == null ? domain.openTracking : email.open_tracking === 1;
      const clickTracking = email.click_tracking == null ? domain.clickTracking : email.click_tracking === 1;
      if (!openTracking && !clickTracking) return html;
      const base = trackingBase(domain);
      const unsubscribe = listUnsubscribeUrls(email);
      return applyTracking(html, {
        pixelUrl: openTracking ? `${base}/t/o/${tokens.open(email.id)}.gif` : undefined,
        rewriteLink: clickTracking
          ? (url) => {
              if (isUnsubscribeLink(url, unsubscribe)) return undefined;
              let href: string;
              try {
                href = new URL(url).href; // percent-encoded, so it is a valid Location header later
              } catch {
                return undefined;
              }
              const token = tokens.click(email.id, href);
              return token.length <= MAX_TRACKING_TOKEN_CHARS ? `${base}/t/c/${token}` : undefined;
            }
          : undefined,
      });
    },

    /**
     * Pixel fetched: records OPENED (every open is an event, flagged machine or not; analytics
     * counts the first of each kind).
     */
    async recordOpen(hit: TrackingHit): Promise<boolean> {
      const valid = tokens.verifyOpen(hit.token);
      if (!valid) return false;
      const { email, hostOk } = await emailFor(valid.emailId, hit.host);
      if (!email || !hostOk) return false;
      const nowMs = deps.clock.nowMs();
      const person = who(hit);
      await record(email, 'OPENED', { timestamp: new Date(nowMs).toISOString(), ...person, ...(await verdict(email, person.userAgent, person.ip, nowMs)) });
      return true;
    },

    /**
     * Tracked link followed: the signed destination, or null (404) for a forged or foreign
     * link. `record` is false for HEAD requests, which only probe.
     */
    async click(hit: TrackingHit, recordIt: boolean): Promise<string | null> {
      const valid = tokens.verifyClick(hit.token);
      if (!valid) return null;
      const { email, hostOk } = await emailFor(valid.emailId, hit.host);
      if (!hostOk) return null;
      if (email && recordIt) {
        const { userAgent, ip } = who(hit);
        try {
          const nowMs = deps.clock.nowMs();
          const flag = await verdict(email, userAgent, ip, nowMs, valid.url);
          await record(email, 'CLICKED', { timestamp: new Date(nowMs).toISOString(), url: valid.url, userAgent, ip, ...flag });
        } catch (err) {
          // The reader still gets where they were going; only the statistic is lost.
          deps.logger.error({ err, emailId: email.id }, 'recording a click failed');
        }
      }
      return valid.url;
    },
  };
}
export type TrackingService = ReturnType<typeof createTrackingService>;
