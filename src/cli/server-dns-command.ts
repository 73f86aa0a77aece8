import type { Command } from 'commander';
import { printTable, withApp } from './cli-context.js';
import { isLocalHostname } from '../core/domains/dns-records.js';

/**
 * `posthorn server-dns`: the records for the server's own host name. Mail Posthorn sends as
 * itself (TLS reports, RFC 8460) comes from tlsrpt-noreply@<hostname>, DKIM-signed with the
 * server key (made on first use and kept in the store); SPF lets receivers check the envelope.
 */
export function registerServerDns(program: Command): void {
  program
    .command('server-dns')
    .description("print the DNS records of this server's host name (DKIM and SPF for the mail it sends as itself, e.g. TLS reports)")
    .action(async (_opts: unknown, cmd: Command) => {
      await withApp(cmd, async (app) => {
        const key = await app.tlsReports.serverDkimKey();
        const hostname = app.config.hostname;
        // As domains add warns: records for localhost are nobody's to publish.
        if (isLocalHostname(hostname)) {
          process.stderr.write(`posthorn: warning: hostname is ${hostname}: no DNS zone has records for it, so receivers cannot check this server's mail; set hostname (POSTHORN_HOSTNAME) to this server's public DNS name first\n`);
        }
        process.stdout.write(`Publish these records for ${hostname} (its A/AAAA must be this server's public address):\n\n`);
        printTable([
          { type: 'TXT', name: key.record.name, value: key.record.value },
          { type: 'TXT', name: hostname, value: 'v=spf1 a -all' },
        ]);
      });
    });
}
