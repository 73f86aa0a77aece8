/**
 * One HTTPS request for transport-security work: fetching an MTA-STS policy (RFC 8461 §3.3) and
 * posting a TLS report (RFC 8460 §3). node:https rather than fetch, so that:
 *
 * - the socket connects to the address we resolved through Posthorn's resolver (a pinned
 *   `lookup`), never the system resolver, while SNI, Host and the certificate check use the name;
 * - the certificate is PKIX-validated against the system CAs plus outbound.caFile, TLS 1.2+;
 * - redirects are never followed (node:https does not) and no HTTP cache exists;
 * - one deadline bounds connect, headers and body, and the body is bounded: past its limit the
 *   request fails, or (overflow 'cut') the answer is what was read.
 */
import https from 'node:https';
import net, { type LookupFunction } from 'node:net';
import tls from 'node:tls';

export type HttpsFailureKind = 'tls' | 'network' | 'timeout' | 'too-large';

export class HttpsRequestError extends Error {
  constructor(
    readonly kind: HttpsFailureKind,
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'HttpsRequestError';
  }
}

export interface HttpsRequestOptions {
  method: 'GET' | 'POST';
  url: URL;
  /** The checked address to connect to. */
  address: string;
  headers?: Record<string, string>;
  body?: Buffer;
  timeoutMs: number;
  maxBodyBytes: number;
  /**
   * A body past maxBodyBytes: 'fail' (a policy that large is no policy), or 'cut': the answer
   * with what was read, the rest left unread (a report POST needs only the status).
   */
  overflow?: 'fail' | 'cut';
  /** From httpsCaList(); undefined: Node's bundled roots. */
  ca?: (string | Buffer)[];
}

export interface HttpsResponse {
  status: number;
  contentType: string;
  body: Buffer;
}

/** With extra CAs, Node's bundled roots must be listed too (passing `ca` replaces them). */
export function httpsCaList(extra: string | Buffer | undefined): (string | Buffer)[] | undefined {
  return extra === undefined || extra.length === 0 ? undefined : [...tls.rootCertificates, extra];
}

/** TLS errors Node reports while verifying the peer (OpenSSL verify codes, the name check). */
const TLS_VERIFY_CODES = /^(CERT_|DEPTH_ZERO|SELF_SIGNED|UNABLE_TO_|ERR_TLS_CERT|HOSTNAME_MISMATCH|ERR_SSL|EPROTO)/;

function pinnedLookup(address: string): LookupFunction {
  const family = net.isIPv6(address) ? 6 : 4;
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as LookupFunction;
}

export function httpsRequest(opts: HttpsRequestOptions): Promise<HttpsResponse> {
  const { url } = opts;
  if (url.protocol !== 'https:') return Promise.reject(new HttpsRequestError('network', `not an https URL: ${url.protocol}`));
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    const controller = new AbortController();
    let settled = false;
    const finish = (err: HttpsRequestError | null, res?: HttpsResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) {
        controller.abort();
        reject(err);
      } else resolve(res!);
    };
    const timer = setTimeout(() => finish(new HttpsRequestError('timeout', `no complete answer within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    const req = https.request(
      {
        method: opts.method,
        hostname,
        port: url.port ? Number(url.port) : 443,
        path: `${url.pathname}${url.search}`,
        headers: { ...(opts.headers ?? {}), Host: url.host, ...(opts.body ? { 'Content-Length': String(opts.body.length) } : {}) },
        lookup: pinnedLookup(opts.address),
        ...(net.isIP(hostname) === 0 ? { servername: hostname } : {}),
        ...(opts.ca ? { ca: opts.ca } : {}),
        rejectUnauthorized: true,
        minVersion: 'TLSv1.2',
        agent: false,
        signal: controller.signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const answer = (): HttpsResponse => ({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks).subarray(0, opts.maxBodyBytes) });
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > opts.maxBodyBytes) {
            if (opts.overflow === 'cut') {
              chunks.push(chunk);
              finish(null, answer());
            } else finish(new HttpsRequestError('too-large', `response body larger than ${opts.maxBodyBytes} bytes`));
            res.destroy();
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () => finish(null, answer()));
        res.on('error', (err) => finish(new HttpsRequestError('network', err.message)));
      },
    );
    // A 101 goes to 'upgrade' listeners only: without one the request would wait out its deadline.
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      finish(new HttpsRequestError('network', `answered HTTP ${res.statusCode ?? 101} (switching protocols)`));
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      const code = err.code ?? '';
      const kind: HttpsFailureKind = TLS_VERIFY_CODES.test(code) || /certificate|self.signed|altname/i.test(err.message) ? 'tls' : 'network';
      finish(new HttpsRequestError(kind, err.message, code || undefined));
    });
    req.end(opts.body);
  });
}
