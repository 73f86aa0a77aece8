import { BlockList, isIP } from 'node:net';
import type Router from '@koa/router';
import type { ApiKeyService } from '../../core/api-keys/api-key-service.js';
import { AppError } from '../../core/errors.js';
import type { OperatorKeyService } from '../../core/operators/operator-key-service.js';
import { bearerToken } from '../http-server.js';

/*
 * GET /metrics in the Prometheus text format. A scraper on an allowed address (metrics.allowFrom,
 * loopback by default) needs no key; anyone else presents an operator key. The address is the
 * connection's own, never X-Forwarded-For, which a client can write.
 */

export interface MetricsRouteDeps {
  metrics: { render(): Promise<string>; contentType: string };
  operatorKeys: Pick<OperatorKeyService, 'authenticate'>;
  apiKeys: Pick<ApiKeyService, 'authenticate'>;
  allowFrom: readonly string[];
}

function blockListOf(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address, bits] = entry.trim().split('/') as [string, string | undefined];
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(bits), family);
  }
  return list;
}

/** 127.0.0.1 arrives as ::ffff:127.0.0.1 on a dual-stack socket. */
function allowed(list: BlockList, remote: string | undefined): boolean {
  if (!remote) return false;
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(remote)?.[1];
  if (v4) return list.check(v4, 'ipv4');
  return list.check(remote, isIP(remote) === 6 ? 'ipv6' : 'ipv4');
}

export function metricsRoute(deps: MetricsRouteDeps) {
  const list = blockListOf(deps.allowFrom);
  return (router: Router) => {
    router.get('/metrics', async (ctx) => {
      const token = bearerToken(ctx);
      if (token !== undefined) {
        await deps.operatorKeys.authenticate(token).catch(async (err: unknown) => {
          if (await deps.apiKeys.authenticate(token).then(() => true, () => false)) throw new AppError('FORBIDDEN', 'team API keys may not read /metrics: use a server-operator key');
          throw err;
        });
      } else if (!allowed(list, ctx.req.socket.remoteAddress)) {
        throw new AppError('UNAUTHORIZED', 'GET /metrics needs an operator key as bearer, or a request from an address in metrics.allowFrom');
      }
      ctx.set('Cache-Control', 'no-store');
      ctx.type = deps.metrics.contentType;
      ctx.body = await deps.metrics.render();
    });
  };
}
