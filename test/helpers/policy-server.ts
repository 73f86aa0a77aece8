/**
 * An HTTPS server on loopback standing in for every `mta-sts.<domain>` host (RFC 8461 §3.3) and
 * for https: TLS report targets (RFC 8460 §5.4): policies are served by the Host header, POSTs
 * are recorded. Its certificate comes from the test CA (valid) unless a test gives another.
 */
import { EventEmitter, once } from 'node:events';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface PolicyResponse {
  status?: number;
  contentType?: string;
  body: string;
  /** A Location header (with a 3xx status): senders must not follow it. */
  location?: string;
}

export interface ReceivedPost {
  host: string;
  path: string;
  contentType: string;
  body: Buffer;
}

export interface PolicyServer {
  readonly port: number;
  /** Every GET of a policy, in order: the Host it asked for. */
  readonly fetches: string[];
  readonly posts: ReceivedPost[];
  /** TCP connections accepted so far (a refused destination must not even connect). */
  connectionCount(): number;
  /** Serves `policy` for https://mta-sts.<domain>/.well-known/mta-sts.txt; a string is text/plain with 200. */
  setPolicy(domain: string, policy: string | PolicyResponse): void;
  removePolicy(domain: string): void;
  /** The status POSTs are answered with (default 200), and the body (default "ok"). */
  setPostStatus(status: number, body?: string): void;
  waitForPosts(n: number, timeoutMs?: number): Promise<ReceivedPost[]>;
  close(): Promise<void>;
}

export function stsPolicyText(mode: 'enforce' | 'testing' | 'none', mx: string[], maxAge = 86400): string {
  return ['version: STSv1', `mode: ${mode}`, ...mx.map((m) => `mx: ${m}`), `max_age: ${maxAge}`, ''].join('\r\n');
}

export async function startPolicyServer(tls: { key: string; cert: string }): Promise<PolicyServer> {
  const policies = new Map<string, PolicyResponse>();
  const fetches: string[] = [];
  const posts: ReceivedPost[] = [];
  const events = new EventEmitter();
  let postStatus = 200;
  let postBody = 'ok';
  const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const host = String(req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST') {
        posts.push({ host, path: req.url ?? '', contentType: String(req.headers['content-type'] ?? ''), body: Buffer.concat(chunks) });
        events.emit('post');
        res.writeHead(postStatus, { 'content-type': 'text/plain' }).end(postBody);
        return;
      }
      fetches.push(host);
      const policy = req.url === '/.well-known/mta-sts.txt' && host.startsWith('mta-sts.') ? policies.get(host.slice('mta-sts.'.length)) : undefined;
      if (!policy) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        return;
      }
      res.writeHead(policy.status ?? 200, { 'content-type': policy.contentType ?? 'text/plain', ...(policy.location ? { location: policy.location } : {}) }).end(policy.body);
    });
  });
  let connections = 0;
  server.on('connection', () => connections++);
  server.on('tlsClientError', () => {
    // A client refusing our certificate is what some tests are about.
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    fetches,
    posts,
    connectionCount: () => connections,
    setPolicy(domain, policy) {
      policies.set(domain.toLowerCase(), typeof policy === 'string' ? { body: policy } : policy);
    },
    removePolicy(domain) {
      policies.delete(domain.toLowerCase());
    },
    setPostStatus(status, body = 'ok') {
      postStatus = status;
      postBody = body;
    },
    async waitForPosts(n, timeoutMs = 10_000) {
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), timeoutMs);
      try {
        while (posts.length < n) await once(events, 'post', { signal: ac.signal });
        return posts.slice();
      } finally {
        clearTimeout(timer);
      }
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
