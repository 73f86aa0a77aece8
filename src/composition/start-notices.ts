import type { Config } from '../config/defaults.js';
import { join, resolve } from 'node:path';
import { derivedPublicUrl, isPublicUrlDerived } from '../config/load.js';
import { databaseUrlTarget } from '../store/pg/pg-url.js';
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

/** The URL to open on this machine: the public one when set, else the listener's real port (http.port may be 0). */
export function openableUrl(config: Config, httpPort: number): string {
  return isPublicUrlDerived(config) ? derivedPublicUrl({ host: config.http.host, port: httpPort }) : config.publicUrl;
}

/**
 * The last line of a start: where the API, the console and the data are. A later start prints
 * no first key or console hint, and the listener lines name a bind address, not a URL to open.
 */
export function announceReady(config: Config, logger: Logger, httpPort: number): void {
  const url = openableUrl(config, httpPort);
  const dataDir = resolve(config.dataDir);
  const store = config.store.url ? `PostgreSQL ${databaseUrlTarget(config.store.url)}` : `SQLite ${join(dataDir, 'posthorn.db')}`;
  const consoleUrl = config.console.enabled ? `${url}/console` : null;
  logger.info(
    { event: 'serve.ready', url, console: consoleUrl, dataDir, store, sandbox: config.sandbox },
    `Posthorn is running: API at ${url}/v1, ${consoleUrl ? `console at ${consoleUrl}` : 'console off'}, data in ${dataDir} (${store})`,
  );
}
