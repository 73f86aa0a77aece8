import type Router from '@koa/router';
import type { DomainService } from '../core/domains/domain-service.js';
import type { Logger } from '../lib/logger.js';

// The MTA-STS policy of receiving domains (RFC 8461 §3.3), outside /v1 and without a key: senders
// fetch https://mta-sts.<domain>/.well-known/mta-sts.txt, the host a CNAME to this server. HTTPS
// is terminated in front of Posthorn (docs/inbound.md); this answers by the Host header.

export function mtaStsRoutes(domains: Pick<DomainService, 'servedMtaStsPolicy'>, logger: Logger) {
  return (router: Router): void => {
    router.get('/.well-known/mta-sts.txt', async (ctx) => {
      let policy: string | null = null;
      try {
        policy = await domains.servedMtaStsPolicy(ctx.hostname);
      } catch (err) {
        logger.error({ err, host: ctx.hostname }, 'reading the MTA-STS policy failed');
        ctx.status = 503;
        ctx.type = 'text/plain';
        ctx.body = 'temporarily unavailable\n';
        return;
      }
      ctx.type = 'text/plain; charset=utf-8';
      // §3.3: senders must not cache the file by HTTP; max_age is what they go by.
      ctx.set('Cache-Control', 'no-store');
      if (!policy) {
        ctx.status = 404;
        ctx.body = 'no MTA-STS policy is served for this host\n';
        return;
      }
      ctx.status = 200;
      ctx.body = policy;
    });
  };
}
