import http from 'node:http';
import https from 'node:https';
import net, { type LookupFunction } from 'node:net';
import { unescape as percentDecode } from 'node:querystring';
import type { AttemptOutcome } from '../core/webhooks/webhook-outbox.js';
import type { PinnedTarget } from '../core/webhooks/url-policy.js';

// One webhook POST over node:http(s) rather than fetch: the socket connects to the address
// the SSRF check approved (a `lookup` that answers with it), so a name rebound between the
// check and the connect cannot redirect us; the Host header and TLS SNI/certificate check
// still use the name. Redirects are never followed (node:http does not), and one abort
// signal bounds the whole exchange: connect, headers and body.

export interface PostOptions {
  timeoutMs: number;
  maxBodyBytes: number;
  agents: { http: http.Agent; https: https.Agent };
}

function pinnedLookup(address: string, family: 4 | 6): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    // With autoSelectFamily (the Node 20 default) net asks for every address at once.
    if (options?.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as LookupFunction;
}

export function createWebhookAgents(): { http: http.Agent; https: https.Agent } {
  // Keep-alive: a busy endpoint gets one connection reused for many events. A reused socket
  // was connected to an address that passed the check when it was opened. No cap on sockets
  // per host: the dispatcher bounds the calls in flight (per endpoint and in total), and a cap
  // here queued the calls of endpoints sharing a host behind each other's hanging ones, their
  // timeouts running.
  return {
    http: new http.Agent({ keepAlive: true }),
    https: new https.Agent({ keepAlive: true }),
  };
}

export function postPinned(target: PinnedTarget, headers: Record<string, string>, body: string, opts: PostOptions): Promise<AttemptOutcome> {
  const started = performance.now();
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), opts.timeoutMs);
  const payload = Buffer.from(body, 'utf8');
  return new Promise<AttemptOutcome>((resolve) => {
    let settled = false;
    const finish = (o: Omit<AttemptOutcome, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...o, durationMs: performance.now() - started });
    };
    const timeoutMessage = () => `timed out after ${opts.timeoutMs} ms`;
    const https_ = target.url.protocol === 'https:';
    const options: https.RequestOptions = {
      protocol: target.url.protocol,
      hostname: target.hostname,
      port: target.url.port ? Number(target.url.port) : https_ ? 443 : 80,
      path: `${target.url.pathname}${target.url.search}`,
      method: 'POST',
      headers: { ...headers, Host: target.url.host, 'Content-Length': String(payload.length) },
      // Decoded as the URL standard does: a "%" not before two hex digits is itself (a password
      // may hold one; decodeURIComponent threw on it and no attempt could ever be made).
      auth: target.url.username ? `${percentDecode(target.url.username)}:${percentDecode(target.url.password)}` : undefined,
      agent: https_ ? opts.agents.https : opts.agents.http,
      lookup: pinnedLookup(target.address, target.family),
      signal: controller.signal,
      ...(https_ && !net.isIP(target.hostname) ? { servername: target.hostname } : {}),
    };
    let req: http.ClientRequest;
    let answer: http.IncomingMessage | undefined;
    try {
      req = (https_ ? https : http).request(options, (res) => {
        answer = res;
        const chunks: Buffer[] = [];
        let size = 0;
        const done = (error: string | null) => {
          const text = Buffer.concat(chunks).subarray(0, opts.maxBodyBytes).toString('utf8');
          finish({ status: res.statusCode ?? null, body: text, error, location: res.headers.location ?? null });
        };
        res.on('data', (chunk: Buffer) => {
          if (size < opts.maxBodyBytes) {
            chunks.push(chunk);
            size += chunk.length;
          }
          if (size >= opts.maxBodyBytes) {
            // Enough kept: stop reading rather than let a receiver stream at us forever.
            done(null);
            res.destroy();
          }
        });
        res.on('end', () => done(null));
        res.on('error', (err) => done(controller.signal.aborted ? timeoutMessage() : `response: ${err.message}`));
        res.on('close', () => done(controller.signal.aborted ? timeoutMessage() : res.complete ? null : 'the connection closed before the response was complete'));
      });
    } catch (err) {
      finish({ status: null, body: null, error: (err as Error).message });
      return;
    }
    req.on('error', (err) => {
      // Bytes after a complete answer (a 204 sent with a chunked terminator, a length that lies
      // short) are a parse error of the connection, not of the answer: it counts, settled by
      // the answer's own end or close; node:http does not reuse the connection.
      if (answer?.complete && !controller.signal.aborted) return;
      finish({ status: null, body: null, error: controller.signal.aborted ? timeoutMessage() : err.message });
    });
    // A 101 goes to 'upgrade' listeners only, never to the response callback: without this one
    // node:http closed the socket and the attempt never ended (no error, no abort after close).
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      finish({ status: null, body: null, error: `answered HTTP ${res.statusCode ?? 101} (switching protocols): not an answer to a webhook` });
    });
    req.end(payload);
  });
}
