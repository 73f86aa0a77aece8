import { BlockList, isIP } from 'node:net';
import type Router from '@koa/router';
import type { ApiKeyService } from '../../core/api-keys/api-key-service.js';
import { AppError } from '../../core/errors.js';
import type { OperatorKeyService } from '../../core/operators/operator-key-service.js';
import { bearerToken } from '../http-server.js';

/*
 * GET /metrics in the Prometheus text format. A scraper on an allowed address (metrics.allowFrom,
 * loopback by default) needs no key; anyone else presents an operator key. The address is the
 * connection's own, never X-Forwarded-For, which a client can write. But a reverse proxy on this
 * host connects from loopback for every client it relays: a relayed request (it carries a proxy's
 * header) also needs the client the proxy names to be allowed, which only http.trustProxy makes
 * believable; a header can so only close the door, never open it. A Bearer is checked from any
 * address (a wrong one is 401, a team key 403); an Authorization of another scheme is no key.
 */

/** Headers a reverse proxy adds to say whom it relays (nginx's usual X-Real-IP, RFC 7239 Forwarded). */
const RELAY_HEADERS = ['x-forwarded-for', 'x-real-ip', 'forwarded'];

export interface MetricsRouteDeps {
  metrics: { render(): Promise<string>; contentType: string };
  operatorKeys: Pick<OperatorKeyService, 'authenticate'>;
  apiKeys: Pick<ApiKeyService, 'authenticate'>;
  allowFrom: readonly string[];
  /** http.trustProxy: ctx.ip is the client the proxy named in X-Forwarded-For. */
  trustProxy: boolean;
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

function relayed(ctx: { get(field: string): string }): boolean {
  return RELAY_HEADERS.some((h) => ctx.get(h) !== '');
}

export function metricsRoute(deps: MetricsRouteDeps) {
  const list = blockListOf(deps.allowFrom);
  return (router: Router) => {
    router.get('/metrics', async (ctx) => {
      // Only a Bearer is a key: another scheme (a scraper's Basic credentials meant for a proxy)
      // was not sent for us, and counts as no key at all.
      const token = /^Bearer(\s|$)/i.test(ctx.get('authorization')) ? bearerToken(ctx) : undefined;
      if (token !== undefined) {
        await deps.operatorKeys.authenticate(token).catch(async (err: unknown) => {
          if (await deps.apiKeys.authenticate(token).then(() => true, () => false)) throw new AppError('FORBIDDEN', 'team API keys may not read /metrics: use a server-operator key');
          throw err;
        });
      } else if (!allowed(list, ctx.req.socket.remoteAddress) || (relayed(ctx) && !(deps.trustProxy && ctx.get('x-forwarded-for') !== '' && allowed(list, ctx.ip)))) {
        throw new AppError('UNAUTHORIZED', 'GET /metrics needs an operator key as bearer, or a request from an address in metrics.allowFrom');
      }
      ctx.set('Cache-Control', 'no-store');
      ctx.type = deps.metrics.contentType;
      ctx.body = await deps.metrics.render();
    });
  };
}
