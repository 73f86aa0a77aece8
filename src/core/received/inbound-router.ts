import { domainToASCII } from 'node:url';
import type { Clock } from '../../lib/clock.js';
import type { DomainRecord, DomainsRepository } from '../../store/repositories/domains-repository.js';
import type { DeliveriesRepository } from '../../store/repositories/deliveries-repository.js';
import type { EmailRow, EmailsRepository } from '../../store/repositories/emails-repository.js';
import { canonicalHost } from '../domains/domain-names.js';
import { receivingOwners } from '../domains/name-owners.js';
import { addressKey } from '../emails/addresses.js';
import { forbidden, notFound } from '../errors.js';
import { recipientTag, splitReturnPathToken, transactionTag } from './return-path-token.js';

// Which mail the inbound listener takes (architecture.md, Outbound, inbound, tracking): bounces to our return paths, reports to
// the complaint address, and mail for domains with receiving on. Everything else is a relay
// attempt and refused at RCPT (RFC 5321 3.6.2: a server that is not a relay refuses it).

/** Local part of the return path: `bounces+<email id>_<tag>` (VERP, set by the outbound engine; return-path-token.ts). */
const VERP_LOCAL = /^bounces(?:\+([A-Za-z0-9_]{1,100}))?$/i;
const DAY_MS = 24 * 3600_000;

/** Local part of a TLS report mailbox: `tlsrpt+<domain id>` (core/domains/dns-records.ts tlsRptAddress). */
const TLSRPT_LOCAL = /^tlsrpt\+(\d{1,10})$/i;

/**
 * What a tagged VERP token proves (return-path-token.ts): the transaction to one recipient (its
 * address as addressKey spells it), or one to several recipients at a domain.
 */
export type TagScope = { recipient: string } | { rcptDomain: string };

export type InboundRoute =
  /**
   * A return-path address; `email` when the VERP token named one, `tagged` when its tag named
   * the transaction too.
   */
  | { kind: 'bounce'; address: string; domains: DomainRecord[]; email: EmailRow | null; tagged: TagScope | null }
  | { kind: 'complaint'; address: string }
  | { kind: 'receive'; address: string; domains: DomainRecord[] }
  /** A mail client's unsubscribe by mail: the mailto target of a campaign's List-Unsubscribe (RFC 2369). */
  | { kind: 'unsubscribe'; address: string; token: string }
  /** A TLS report (RFC 8460) for a domain of ours: the rua of its `_smtp._tls` record, `tlsrpt+<domain id>@<hostname>`. */
  | { kind: 'tls-report'; address: string; domain: DomainRecord };

export interface SplitAddress {
  local: string;
  /** Lowercased, A-label form, no trailing dot. */
  domain: string;
}

export function splitAddress(address: string): SplitAddress | null {
  const at = address.lastIndexOf('@');
  if (at < 1 || at === address.length - 1) return null;
  const local = address.slice(0, at);
  const ascii = domainToASCII(canonicalHost(address.slice(at + 1)));
  if (!ascii) return null;
  return { local, domain: ascii };
}

/** The VERP token (`<email id>_<tag>`) of a return path, when the address is one. */
export function verpToken(address: string): string | null {
  const split = splitAddress(address.replace(/^<|>$/g, '').trim());
  if (!split) return null;
  return VERP_LOCAL.exec(split.local)?.[1] ?? null;
}

export interface InboundRouterDeps {
  domains: DomainsRepository;
  emails: EmailsRepository;
  deliveries: Pick<DeliveriesRepository, 'listForEmail'>;
  /** Keys the return paths' transaction tags. */
  secret: string;
  /** Dates the window of late reports to a deleted domain's return paths. */
  clock: Clock;
  /**
   * How long after a domain is deleted its tagged return paths still take reports
   * (inbound.lateReportDays, 30 by default; docs/inbound.md, Late reports for a deleted domain).
   * Remote MTAs keep trying for about five days (RFC 5321 4.5.4.1) before their final DSN, and
   * feedback loops send complaints days or weeks after the mail was read; the window also bounds
   * how long a name we no longer serve still has mail accepted for it. 0: none after the deletion.
   */
  lateReportDays: number;
  /** Full complaint address, e.g. complaints@mx.example.com. */
  complaintAddress: string;
  /** This server's host name: `unsubscribe+<token>@<it>` is a campaign unsubscribe, `tlsrpt+<domain id>@<it>` a TLS report mailbox. */
  unsubscribeHost?: string;
  /** Whether a token is a validly signed campaign unsubscribe token. */
  isUnsubscribeToken?: (token: string) => boolean;
}

export function createInboundRouter(deps: InboundRouterDeps) {
  const complaint = splitAddress(deps.complaintAddress);
  const lateReportMs = deps.lateReportDays * DAY_MS;

  /** Live domains whose return-path host `<bounceLabel>.<name>` is this host name. */
  async function returnPathDomains(host: string): Promise<DomainRecord[]> {
    const dot = host.indexOf('.');
    if (dot < 1) return [];
    const label = host.slice(0, dot);
    const name = host.slice(dot + 1);
    return (await deps.domains.findAllByName(name)).filter((d) => d.bounceLabel.toLowerCase() === label);
  }

  /**
   * The email and transaction a VERP token names. A tagged token names one recipient of the
   * email or one of its recipient domains (a wrong tag is as unknown as a made-up id); an
   * untagged one (mail sent before tags) names only the email, and `tagged` is null.
   */
  async function emailFor(token: string, domains: DomainRecord[]): Promise<{ email: EmailRow; tagged: TagScope | null } | undefined> {
    const { emailToken, tag } = splitReturnPathToken(token);
    const email = await emailById(emailToken, domains);
    if (!email) return undefined;
    if (!tag) return { email, tagged: null };
    const rows = await deps.deliveries.listForEmail(email.id);
    const recipient = [...new Set(rows.map((d) => addressKey(d.recipient)))].find((r) => recipientTag(deps.secret, email.id, r) === tag);
    if (recipient !== undefined) return { email, tagged: { recipient } };
    const rcptDomain = [...new Set(rows.map((d) => d.rcpt_domain.toLowerCase()))].find((d) => transactionTag(deps.secret, email.id, d) === tag);
    return rcptDomain !== undefined ? { email, tagged: { rcptDomain } } : undefined;
  }

  /**
   * The email a tagged token names when the domain it was sent from has been deleted, at most
   * lateReportDays ago, and its return-path host was `host`: the report is about mail the
   * domain's team sent while it owned the name, so it goes to that email (its team), whoever
   * holds the name now. Only a tag that verifies (keyed with the secret) opens this: an
   * untagged token, or plain `bounces@`, proves nothing once the name is not ours.
   */
  async function retiredEmailFor(token: string, host: string): Promise<{ domain: DomainRecord; email: EmailRow; tagged: TagScope } | undefined> {
    const { emailToken, tag } = splitReturnPathToken(token);
    if (!tag) return undefined;
    const row = (await deps.emails.findByIdAnyTeam(emailToken)) ?? (await deps.emails.findByIdIgnoringCase(emailToken));
    if (!row || row.domain_id === null) return undefined;
    const retired = await deps.domains.findDeletedByIdAnyTeam(row.domain_id);
    if (!retired || retired.domain.teamId !== row.team_id) return undefined;
    if (`${retired.domain.bounceLabel}.${retired.domain.name}`.toLowerCase() !== host) return undefined;
    if (deps.clock.now().getTime() - Date.parse(retired.deletedAt) > lateReportMs) return undefined;
    const found = await emailFor(token, [retired.domain]);
    return found?.tagged ? { domain: retired.domain, email: found.email, tagged: found.tagged } : undefined;
  }

  /**
   * The email and transaction a VERP token at return-path host `host` names: a live domain's
   * email, else (late reports) a recently deleted domain's, with the domains the report stays within.
   */
  async function tokenAt(host: string, token: string, liveDomains?: DomainRecord[]): Promise<{ domains: DomainRecord[]; email: EmailRow; tagged: TagScope | null } | undefined> {
    const live = liveDomains ?? (await returnPathDomains(host));
    const found = live.length ? await emailFor(token, live) : undefined;
    if (found) return { domains: live, ...found };
    const late = await retiredEmailFor(token, host);
    return late && { domains: [late.domain], email: late.email, tagged: late.tagged };
  }

  async function emailById(token: string, domains: DomainRecord[]): Promise<EmailRow | undefined> {
    const ids = new Set(domains.map((d) => d.id));
    const exact = await deps.emails.findByIdAnyTeam(token);
    const row = exact ?? (await deps.emails.findByIdIgnoringCase(token));
    // The token must name an email sent from this very return-path domain: a token that
    // belongs to another domain (or team) is as unknown here as a made-up one.
    return row && row.domain_id !== null && ids.has(row.domain_id) ? row : undefined;
  }

  return {
    returnPathDomains,
    emailFor,
    tokenAt,

    /**
     * Decides one RCPT TO. Throws NOT_FOUND (550 5.1.1) for a return-path mailbox that does
     * not exist and FORBIDDEN (550 5.7.1) for anything that is not ours to accept.
     * Reads the store every time, so turning receiving off refuses the domain at once.
     */
    async route(address: string): Promise<InboundRoute> {
      const split = splitAddress(address);
      if (!split) throw forbidden(`<${address}>: not a mailbox this server accepts mail for`);
      if (complaint && split.domain === complaint.domain && split.local.toLowerCase() === complaint.local.toLowerCase()) {
        return { kind: 'complaint', address };
      }
      const tlsrpt = deps.unsubscribeHost && split.domain === deps.unsubscribeHost.toLowerCase() ? TLSRPT_LOCAL.exec(split.local) : null;
      if (tlsrpt) {
        const domain = await deps.domains.findByIdAnyTeam(Number(tlsrpt[1]));
        if (!domain) throw notFound(`<${address}>: unknown TLS report mailbox`);
        return { kind: 'tls-report', address, domain };
      }
      if (deps.unsubscribeHost && deps.isUnsubscribeToken && split.domain === deps.unsubscribeHost.toLowerCase() && /^unsubscribe\+/i.test(split.local)) {
        const token = split.local.slice('unsubscribe+'.length);
        if (!deps.isUnsubscribeToken(token)) throw notFound(`<${address}>: unknown unsubscribe address`);
        return { kind: 'unsubscribe', address, token };
      }
      const rpDomains = await returnPathDomains(split.domain);
      const m = VERP_LOCAL.exec(split.local);
      if (m?.[1]) {
        const found = await tokenAt(split.domain, m[1], rpDomains);
        if (found) return { kind: 'bounce', address, ...found };
        if (rpDomains.length) throw notFound(`<${address}>: unknown return path`);
        // Not a token of ours: the name is routed as its current owners say (below).
      } else if (rpDomains.length) {
        if (!m) throw notFound(`<${address}>: no such mailbox at this return-path host`);
        return { kind: 'bounce', address, domains: rpDomains, email: null, tagged: null };
      }
      const receiving = receivingOwners(await deps.domains.findAllByName(split.domain));
      if (receiving.length) return { kind: 'receive', address, domains: receiving };
      throw forbidden(`<${address}>: relay access denied`);
    },
  };
}
export type InboundRouter = ReturnType<typeof createInboundRouter>;
