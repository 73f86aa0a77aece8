import type { Config } from '../config/defaults.js';
import { isPublicUrlDerived } from '../config/load.js';
import type { Logger } from '../lib/logger.js';
import { isLocalAddress } from '../lib/local-addresses.js';
import { isLocalHostname, localHostnameWarning } from '../core/domains/dns-records.js';

/** What a newcomer must know at start: sandbox mode, records that point at localhost, links that only this machine can open. */
export function announceSettings(config: Config, logger: Logger, httpPort: number): void {
  if (config.sandbox) {
    logger.warn(
      { event: 'sandbox', sandbox: true },
      'SANDBOX MODE: domains may send before they verify, and every message is delivered to the capture mailbox (GET /v1/sandbox/messages) instead of any MX; nothing leaves this server by SMTP',
    );
  }
  if (isLocalHostname(config.hostname)) logger.warn({ event: 'config.hostname', hostname: config.hostname }, localHostnameWarning(config.hostname, config.sandbox));
  if (!config.sandbox) {
    for (const s of config.outbound.sources) {
      if (s.localAddress && !isLocalAddress(s.localAddress)) {
        logger.warn(
          { event: 'config.outbound.sources', source: s.name, localAddress: s.localAddress },
          `egress source ${s.name}: ${s.localAddress} is not an address of this host; connections from it will fail and its mail will be deferred`,
        );
      }
    }
  }
  if (isPublicUrlDerived(config)) {
    const note = config.http.port === 0 && httpPort !== 0 ? ` (http.port is 0, so links name port 0 rather than ${httpPort})` : '';
    logger.info(
      { event: 'config.publicUrl', publicUrl: config.publicUrl, derived: true },
      `publicUrl is not set: tracking, unsubscribe and confirmation links use ${config.publicUrl}${note}, derived from http.host and http.port; set publicUrl (POSTHORN_PUBLIC_URL) to the URL the world reaches`,
    );
  }
}
