/**
 * Mail Posthorn sends as itself (TLS reports, bounce notices): signed with the server's own DKIM
 * key (d= the hostname) and sent through Posthorn's MX lookup and connection pool (or the relay),
 * one recipient, opportunistic TLS and no transport requirement, so sending one never feeds a
 * TLS report (RFC 8460 §3).
 */
import type { ServerDkimKey } from '../../core/tls-reports/server-dkim-key.js';
import type { DkimSigner } from './dkim-signer.js';
import { MxLookupError, type MxResolver } from './mx-resolver.js';
import type { DeliveryTarget, SmtpClientPool } from './smtp-client-pool.js';

export interface OwnMailSenderOptions {
  pool: SmtpClientPool;
  mx: MxResolver;
  signer: DkimSigner;
  serverKey: () => Promise<ServerDkimKey>;
  /** Destination SMTP port (25; tests use their sink's). */
  port: number;
  relay?: { host: string; address?: string; port: number };
}

/** ok, or why not and whether trying again could help. */
export type OwnMailOutcome = { ok: true } | { ok: false; permanent: boolean; error: string };

const MAX_TARGETS = 6;

export function createOwnMailSender(opts: OwnMailSenderOptions) {
  async function targetsFor(domain: string): Promise<DeliveryTarget[]> {
    if (opts.relay) return [{ host: opts.relay.host, address: opts.relay.address ?? opts.relay.host, port: opts.relay.port }];
    const hosts = await opts.mx.resolve(domain);
    return hosts.flatMap((h) => h.addresses.map((address) => ({ host: h.host, address, port: opts.port }))).slice(0, MAX_TARGETS);
  }

  return {
    /** Signs `raw` with the server's key and sends it to `to` with envelope sender `mailFrom` ('' is <>). */
    async send(input: { mailFrom: string; to: string; raw: Buffer }): Promise<OwnMailOutcome> {
      const key = await opts.serverKey();
      const message = await opts.signer.sign(input.raw, { domain: key.domain, selector: key.selector, privateKey: key.privateKey });
      const domain = input.to.slice(input.to.lastIndexOf('@') + 1).toLowerCase();
      let targets: DeliveryTarget[];
      try {
        targets = await targetsFor(domain);
      } catch (err) {
        return { ok: false, permanent: err instanceof MxLookupError && err.permanent, error: (err as Error).message };
      }
      const errors: string[] = [];
      for (const target of targets) {
        const res = await opts.pool.send(target, { mailFrom: input.mailFrom, recipients: [input.to], message, tlsPolicy: 'OPPORTUNISTIC' });
        if (res.notAttempted) return { ok: false, permanent: false, error: 'not attempted: stopping' };
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
