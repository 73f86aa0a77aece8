// A webhook endpoint for the fault proofs: node:http on 127.0.0.1 port 0 that answers each
// request according to its current mode, and records every request with what it got.
import { EventEmitter, once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type EndpointMode =
  /** 200 at once. */
  | 'ok'
  /** Reads the request and never answers (until the client gives up). */
  | 'hang'
  /** 500 Internal Server Error. */
  | '500'
  /** Reads the request, then resets the TCP connection without a response. */
  | 'reset'
  /** 200, but the body trickles out over `slowMs` before the response ends. */
  | 'slow'
  /** 200 and a body that trickles out forever (headers arrive; the response never ends). */
  | 'dribble';

export interface EndpointCall {
  eventId: string;
  type: string;
  dataId: unknown;
  /** The mode that answered it. */
  mode: EndpointMode;
}

export interface FaultyEndpoint {
  url: string;
  calls: EndpointCall[];
  /** Requests held open by 'hang' right now. */
  readonly hanging: number;
  /** Mode for the next requests; or a function of the request's index (0-based over all requests). */
  setMode(mode: EndpointMode | ((index: number) => EndpointMode)): void;
  waitFor(n: number, timeoutMs?: number): Promise<void>;
  /** Answers every held ('hang') request with this status and body; returns how many. */
  release(status?: number, body?: string): number;
  /** Calls that got a 2xx, per event id. */
  acknowledged(eventId: string): number;
  callsFor(eventId: string): EndpointCall[];
  close(): Promise<void>;
}

export async function startFaultyEndpoint(opts: { slowMs?: number } = {}): Promise<FaultyEndpoint> {
  const slowMs = opts.slowMs ?? 300;
  const calls: EndpointCall[] = [];
  const emitter = new EventEmitter();
  const held = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  let mode: EndpointMode | ((index: number) => EndpointMode) = 'ok';

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let json: any = {};
      try {
        json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        // recorded with empty fields
      }
      const index = calls.length;
      const m = typeof mode === 'function' ? mode(index) : mode;
      calls.push({ eventId: json.id, type: json.type, dataId: json.data?.id, mode: m });
      emitter.emit('call');
      if (m === 'hang') {
        held.add(res);
        res.on('close', () => held.delete(res));
      } else if (m === '500') {
        res.writeHead(500, { 'content-type': 'text/plain' }).end('internal error (fault injected)');
      } else if (m === 'reset') {
        req.socket.resetAndDestroy();
      } else if (m === 'dribble') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const timer = setInterval(() => res.write('.'), 100);
        res.on('close', () => clearInterval(timer));
      } else if (m === 'slow') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        let sent = 0;
        const step = () => {
          if (res.destroyed) return;
          if (++sent >= 5) return res.end('ok');
          res.write('.');
          setTimeout(step, slowMs / 5).unref();
        };
        step();
      } else {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      }
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const isAck = (c: EndpointCall) => c.mode === 'ok' || c.mode === 'slow';

  return {
    url: `http://127.0.0.1:${port}/hook`,
    calls,
    get hanging() {
      return held.size;
    },
    setMode(m) {
      mode = m;
    },
    async waitFor(n, timeoutMs = 20_000) {
      if (calls.length >= n) return;
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), timeoutMs);
      try {
        while (calls.length < n) await once(emitter, 'call', { signal: ac.signal });
      } catch (err) {
        if (ac.signal.aborted) throw new Error(`endpoint: expected ${n} call(s) within ${timeoutMs} ms, got ${calls.length}`);
        throw err;
      } finally {
        clearTimeout(timer);
      }
    },
    release(status = 200, body = 'ok') {
      const all = [...held];
      held.clear();
      for (const res of all) res.writeHead(status, { 'content-type': 'text/plain' }).end(body);
      return all.length;
    },
    acknowledged(eventId) {
      return calls.filter((c) => c.eventId === eventId && isAck(c)).length;
    },
    callsFor(eventId) {
      return calls.filter((c) => c.eventId === eventId);
    },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
