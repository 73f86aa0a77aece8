import { createHmac, timingSafeEqual } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BusEvent } from '../../src/core/events.js';
import { transact } from '../../src/store/store-context.js';
import type { TestApp } from '../helpers/test-app.js';

// A webhook receiver for tests: node:http on 127.0.0.1 port 0, recording raw bodies exactly
// as they arrived, answering what the test asks for (a status, a redirect, or nothing at all).

export interface ReceivedCall {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The body bytes as received (signatures are checked over these). */
  raw: Buffer;
  json: any;
}

export type Reply = { status: number; body?: string; headers?: Record<string, string> } | 'hang';

export interface WebhookReceiver {
  url: string;
  port: number;
  calls: ReceivedCall[];
  /** Requests being held open by 'hang'. */
  readonly hanging: number;
  /** Decides each reply (index counts from 0 over every request received). Default: 200 "ok". */
  reply(fn: (call: ReceivedCall, index: number) => Reply): void;
  /** Resolves once at least n requests arrived (no sleeping: it listens for them). */
  waitFor(n: number): Promise<ReceivedCall[]>;
  /** Answers every held request with 200. */
  release(): void;
  close(): Promise<void>;
}

export async function startWebhookReceiver(path = '/hook'): Promise<WebhookReceiver> {
  const calls: ReceivedCall[] = [];
  const emitter = new EventEmitter();
  const held = new Set<ServerResponse>();
  let decide: (call: ReceivedCall, index: number) => Reply = () => ({ status: 200, body: 'ok' });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let json: unknown;
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch {
        json = undefined;
      }
      const call: ReceivedCall = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, raw, json };
      const index = calls.length;
      calls.push(call);
      const answer = decide(call, index);
      if (answer === 'hang') {
        held.add(res);
        res.on('close', () => held.delete(res));
      } else {
        res.writeHead(answer.status, { 'content-type': 'text/plain', ...(answer.headers ?? {}) });
        res.end(answer.body ?? '');
      }
      emitter.emit('call');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    port,
    calls,
    get hanging() {
      return held.size;
    },
    reply(fn) {
      decide = fn;
    },
    waitFor(n) {
      if (calls.length >= n) return Promise.resolve(calls);
      return new Promise((resolve) => {
        const check = () => {
          if (calls.length >= n) {
            emitter.off('call', check);
            resolve(calls);
          }
        };
        emitter.on('call', check);
      });
    },
    release() {
      for (const res of held) {
        res.writeHead(200);
        res.end('released');
      }
      held.clear();
    },
    close() {
      for (const res of held) res.destroy();
      return new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/**
 * An independent check of the spec's signature: HMAC-SHA256 over "<timestamp>.<raw body>"
 * with the endpoint secret, hex, "v1=" prefix, compared in constant time.
 */
export function verifySignature(secret: string, call: ReceivedCall): boolean {
  const timestamp = call.headers['x-service-timestamp'];
  const signature = call.headers['x-service-signature'];
  if (typeof timestamp !== 'string' || typeof signature !== 'string' || !/^\d+$/.test(timestamp)) return false;
  const expected = 'v1=' + createHmac('sha256', secret).update(Buffer.concat([Buffer.from(`${timestamp}.`, 'utf8'), call.raw])).digest('hex');
  const a = Buffer.from(signature, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** As an emitter does: the event's outbox rows in a write transaction, the bus after its commit. */
export async function emitCommitted(t0: TestApp, event: BusEvent): Promise<void> {
  await transact(t0.app.store.db, async () => t0.app.services.events.inTransaction([event]));
  t0.app.services.events.emit(event);
}
