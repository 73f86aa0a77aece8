/**
 * Mail Posthorn sends as itself (TLS reports, bounce notices): signed with the server's own DKIM
 * key (d= the hostname) and sent through Posthorn's MX lookup and connection pool (or the relay),
 * one recipient. A TLS report goes with opportunistic TLS and no transport requirement, so it
 * reaches a domain whose TLS is broken and never feeds a report itself (RFC 8460 §3); other mail
 * (a bounce notice, with the original's headers) meets the domain's MTA-STS and DANE like any.
 */
import type { ServerDkimKey } from '../../core/tls-reports/server-dkim-key.js';
import type { DkimSigner } from './dkim-signer.js';
import { MxLookupError, type MxResolver } from './mx-resolver.js';
import type { DeliveryTarget, SmtpClientPool } from './smtp-client-pool.js';
import type { TransportRequirement } from './smtp-client-types.js';
import type { TransportPolicy } from './transport-policy.js';

export interface OwnMailSenderOptions {
  pool: SmtpClientPool;
  mx: MxResolver;
  signer: DkimSigner;
  serverKey: () => Promise<ServerDkimKey>;
  /** Destination SMTP port (25; tests use their sink's). */
  port: number;
  relay?: { host: string; address?: string; port: number };
  /** The recipient domains' MTA-STS and DANE (none with a relay), for sends that ask for it. */
  transport?: TransportPolicy;
}

/** ok, or why not and whether trying again could help (notAttempted: the pool is shutting down). */
export type OwnMailOutcome = { ok: true } | { ok: false; permanent: boolean; error: string; notAttempted?: boolean };

const MAX_TARGETS = 6;

export function createOwnMailSender(opts: OwnMailSenderOptions) {
  /** The hosts to try, and why the recipient domain's policies refused the others (never connected to). */
  async function targetsFor(domain: string, policies: boolean): Promise<{ targets: { target: DeliveryTarget; requirement?: TransportRequirement }[]; refused: string[] }> {
    if (opts.relay) return { targets: [{ target: { host: opts.relay.host, address: opts.relay.address ?? opts.relay.host, port: opts.relay.port } }], refused: [] };
    const hosts = await opts.mx.resolve(domain);
    const planned = policies && opts.transport ? await opts.transport.plan(domain, hosts, 'OPPORTUNISTIC') : hosts.map((host) => ({ host, requirement: undefined, refused: undefined }));
    const targets = planned
      .filter((p) => !p.refused)
      .flatMap((p) => p.host.addresses.map((address) => ({ target: { host: p.host.host, address, port: opts.port }, requirement: p.requirement })))
      .slice(0, MAX_TARGETS);
    return { targets, refused: planned.flatMap((p) => (p.refused ? [p.refused.message] : [])) };
  }

  return {
    /** Signs `raw` with the server's key and sends it to `to` with envelope sender `mailFrom` ('' is <>). */
    async send(input: { mailFrom: string; to: string; raw: Buffer; /** Apply the recipient domain's MTA-STS and DANE. */ policies?: boolean }): Promise<OwnMailOutcome> {
      const key = await opts.serverKey();
      const message = await opts.signer.sign(input.raw, { domain: key.domain, selector: key.selector, privateKey: key.privateKey });
      const domain = input.to.slice(input.to.lastIndexOf('@') + 1).toLowerCase();
      let plan: Awaited<ReturnType<typeof targetsFor>>;
      try {
        plan = await targetsFor(domain, input.policies ?? false);
      } catch (err) {
        return { ok: false, permanent: err instanceof MxLookupError && err.permanent, error: (err as Error).message };
      }
      const errors = [...plan.refused];
      for (const { target, requirement } of plan.targets) {
        const res = await opts.pool.send(target, { mailFrom: input.mailFrom, recipients: [input.to], message, tlsPolicy: 'OPPORTUNISTIC', ...(requirement ? { transport: requirement } : {}) });
        if (res.notAttempted) return { ok: false, permanent: false, error: 'not attempted: stopping', notAttempted: true };
        const r = res.recipients[0]!;
        if (!res.connected || res.hostFailure) {
          errors.push(`${target.host}[${target.address}]: ${res.error ?? r.response}`);
          continue;
        }
        if (r.outcome === 'delivered') return { ok: true };
        return { ok: false, permanent: r.outcome === 'bounced', error: `${target.host}: ${r.response}` };
      }
      return { ok: false, permanent: false, error: errors.length ? errors.join('; ') : `no usable MX host for ${domain}` };
    },
  };
}
export type OwnMailSender = ReturnType<typeof createOwnMailSender>;
