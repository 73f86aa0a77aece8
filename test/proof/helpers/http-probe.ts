// HTTP clients for the fuzz suites, below fetch: node:http sends paths exactly as given
// (no dot-segment normalisation, no re-encoding) and bodies as raw bytes; rawHttp() writes
// arbitrary bytes to the socket. Plus the one judge of an answer: the spec's error shape.
import http from 'node:http';
import net from 'node:net';

export interface ProbeRequest {
  method: string;
  /** Sent as is: must already be percent-encoded where needed. */
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
  /** Send the body with Transfer-Encoding: chunked (no Content-Length), in a few pieces. */
  chunked?: boolean;
}

export interface ProbeResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: unknown;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });

/** One request over a kept-alive connection. A connection the server closes before answering rejects. */
export function probe(port: number, req: ProbeRequest): Promise<ProbeResponse> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...(req.headers ?? {}) };
    if (req.body && !req.chunked) headers['content-length'] = String(req.body.length);
    // node's client frames a GET or DELETE body only when told to
    if (req.body && req.chunked) headers['transfer-encoding'] = 'chunked';
    const r = http.request({ host: '127.0.0.1', port, method: req.method, path: req.path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
    });
    // The server may answer (413) and close before the whole body is written: the answer wins.
    r.on('error', (err) => reject(err));
    if (req.body && req.chunked) {
      const third = Math.ceil(req.body.length / 3) || 1;
      for (let i = 0; i < req.body.length; i += third) r.write(req.body.subarray(i, i + third));
      r.end();
    } else {
      r.end(req.body);
    }
  });
}

/** The spec's error codes and the statuses each may come with. */
export const SPEC_ERROR_STATUS: Readonly<Record<string, readonly number[]>> = {
  // 413 (body), 431 (headers), 408 and 417 keep their precise HTTP status with the BAD_REQUEST code (architecture.md, Decisions: errors)
  BAD_REQUEST: [400, 408, 413, 417, 431],
  UNAUTHORIZED: [401],
  FORBIDDEN: [403],
  NOT_FOUND: [404],
  METHOD_NOT_ALLOWED: [405],
  NOT_UNIQUE: [409],
  RATE_LIMITED: [429],
};

/**
 * What is wrong with an answer, or null. Every answer is below 500; an API answer (under /v1
 * or /api/v1) is either 2xx or exactly {error: {code, message}} with a spec code that goes
 * with its status, served as JSON.
 */
export function answerProblem(res: ProbeResponse, api: boolean): string | null {
  if (res.status >= 500) return `status ${res.status}: ${res.text.slice(0, 300)}`;
  if (!api) return null;
  if (res.status >= 200 && res.status < 300) {
    if (String(res.headers['content-type'] ?? '').startsWith('application/json') && res.json === undefined && res.text !== '') return `2xx with a body that is not JSON: ${res.text.slice(0, 200)}`;
    return null;
  }
  if (res.status < 400) return `API answered ${res.status}`;
  if (!String(res.headers['content-type'] ?? '').startsWith('application/json')) return `error ${res.status} served as ${res.headers['content-type']}`;
  const body = res.json as { error?: { code?: unknown; message?: unknown } } | undefined;
  if (!body || typeof body !== 'object' || Array.isArray(body)) return `error ${res.status} body is not an object: ${res.text.slice(0, 200)}`;
  if (Object.keys(body).join() !== 'error') return `error body has keys ${Object.keys(body).join(', ')}`;
  const error = body.error;
  if (!error || typeof error !== 'object' || Array.isArray(error)) return `error is not an object: ${res.text.slice(0, 200)}`;
  if (Object.keys(error).sort().join() !== 'code,message') return `error has keys ${Object.keys(error).join(', ')}`;
  if (typeof error.code !== 'string' || !(error.code in SPEC_ERROR_STATUS)) return `error code ${JSON.stringify(error.code)} is not in the spec`;
  if (!SPEC_ERROR_STATUS[error.code]!.includes(res.status)) return `error code ${error.code} with status ${res.status}`;
  if (typeof error.message !== 'string' || error.message.length === 0) return `error message ${JSON.stringify(error.message)}`;
  return null;
}

export interface RawHttpResult {
  /** Everything the server wrote before the connection closed. */
  bytes: Buffer;
}

/**
 * Splits what a server wrote into responses (status line, headers, Content-Length or chunked
 * body). `headFirst`: the first response answers HEAD, so it has no body whatever its headers
 * say. Returns the responses and a description of any bytes that are not HTTP.
 */
export function parseResponses(bytes: Buffer, headFirst = false): { responses: ProbeResponse[]; garbage: string | null } {
  const responses: ProbeResponse[] = [];
  let at = 0;
  while (at < bytes.length) {
    const headEnd = bytes.indexOf('\r\n\r\n', at);
    if (headEnd < 0) return { responses, garbage: `an incomplete head: ${JSON.stringify(bytes.subarray(at, at + 200).toString('latin1'))}` };
    const lines = bytes.subarray(at, headEnd).toString('latin1').split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3}) [^\r\n]*$/.exec(lines[0]!);
    if (!m) return { responses, garbage: `not a status line: ${JSON.stringify(lines[0]!.slice(0, 200))}` };
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon < 1) return { responses, garbage: `a broken header line: ${JSON.stringify(line.slice(0, 200))}` };
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    const status = Number(m[1]);
    let body: Buffer = Buffer.alloc(0);
    at = headEnd + 4;
    const bodiless = (headFirst && responses.length === 0) || status === 204 || status === 304 || status < 200;
    if (!bodiless && headers['transfer-encoding'] === 'chunked') {
      const parts: Buffer[] = [];
      for (;;) {
        const lineEnd = bytes.indexOf('\r\n', at);
        if (lineEnd < 0) return { responses, garbage: 'a truncated chunked body' };
        const size = parseInt(bytes.subarray(at, lineEnd).toString('latin1'), 16);
        if (!Number.isFinite(size)) return { responses, garbage: 'a broken chunk size' };
        at = lineEnd + 2;
        if (size === 0) {
          at = bytes.indexOf('\r\n', at) + 2;
          break;
        }
        parts.push(bytes.subarray(at, at + size));
        at += size + 2;
      }
      body = Buffer.concat(parts);
    } else if (!bodiless && headers['content-length'] !== undefined) {
      const length = Number(headers['content-length']);
      body = bytes.subarray(at, at + length);
      at += length;
    }
    const text = body.toString('utf8');
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (status >= 200) responses.push({ status, headers, text, json }); // 1xx are interim (100 Continue)
  }
  return { responses, garbage: null };
}

/**
 * Writes raw pieces to the HTTP port, half-closes, and collects whatever comes back until the
 * server closes. `guardMs` only stops a hung test; it is not a timing assertion.
 */
export function rawHttp(port: number, pieces: Buffer[], guardMs = 20_000): Promise<RawHttpResult> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const guard = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server neither answered nor closed; got ${JSON.stringify(Buffer.concat(chunks).toString('latin1').slice(0, 200))}`));
    }, guardMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    // A reset after the server answered and closed is a close like any other.
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(guard);
      resolve({ bytes: Buffer.concat(chunks) });
    });
    socket.once('connect', () => {
      for (const p of pieces) socket.write(p);
      socket.end();
    });
  });
}

/** Records unhandled rejections and uncaught exceptions while a suite runs. */
export function watchProcess() {
  const problems: string[] = [];
  const onRejection = (reason: unknown) => problems.push(`unhandledRejection: ${String((reason as Error)?.stack ?? reason)}`);
  const onException = (err: Error) => problems.push(`uncaughtException: ${err.stack ?? err.message}`);
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  const protoKeys = Object.getOwnPropertyNames(Object.prototype).sort().join();
  return {
    problems,
    /** Object.prototype as it was, and nothing hung on it. */
    prototypePolluted(): string | null {
      const now = Object.getOwnPropertyNames(Object.prototype).sort().join();
      if (now !== protoKeys) return `Object.prototype gained keys: ${now}`;
      const probeObject = {} as Record<string, unknown>;
      if (probeObject.polluted !== undefined) return 'Object.prototype.polluted is set';
      return null;
    },
    stop() {
      process.off('unhandledRejection', onRejection);
      process.off('uncaughtException', onException);
    },
  };
}
