import { createServer, connect, type Server, type Socket } from 'node:net';

/*
 * A TCP proxy in front of a PostgreSQL server that can lose a COMMIT's answer: armed with a
 * statement's text, the next connection that sends it has its COMMIT reach the server, and
 * the server's "COMMIT" reply (CommandComplete) is never forwarded: both sockets are closed
 * instead. The transaction is committed; the client only sees its connection die.
 */

// CommandComplete: 'C', length 11 (itself and "COMMIT\0"), "COMMIT\0".
const COMMIT_DONE = Buffer.from([0x43, 0, 0, 0, 11, ...Buffer.from('COMMIT\0', 'latin1')]);

export interface CommitCutter {
  /** The URL to give the store: `url` with the proxy's host and port. */
  url: string;
  /**
   * Cuts the COMMIT answer of the next connection whose queries contain `marker`; resolves once
   * it has.
   */
  arm(marker: string): Promise<void>;
  close(): Promise<void>;
}

export async function startCommitCutter(url: string): Promise<CommitCutter> {
  const target = new URL(url);
  const sockets = new Set<Socket>();
  let marker: string | null = null;
  let fired: () => void = () => {};

  const server: Server = createServer((client) => {
    const upstream = connect({ host: target.hostname, port: Number(target.port || 5432) });
    sockets.add(client).add(upstream);
    let marked = false;
    let tail = Buffer.alloc(0);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (marker !== null && !marked && chunk.includes(marker)) {
        marked = true;
        marker = null;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (marked) {
        // Looks across the chunk boundary too: the reply may come in pieces.
        const seen = Buffer.concat([tail, chunk]);
        if (seen.includes(COMMIT_DONE)) {
          marked = false;
          end();
          fired();
          return;
        }
        tail = seen.subarray(Math.max(0, seen.length - COMMIT_DONE.length));
      }
      client.write(chunk);
    });
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(port);
  return {
    url: proxied.toString(),
    arm(m: string) {
      marker = m;
      return new Promise<void>((resolve) => (fired = resolve));
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
