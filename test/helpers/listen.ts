import type net from 'node:net';

/** Listens on host:port (0 for any free port) and resolves with the port, or rejects with the listen error. */
export async function listenOn(server: net.Server, port: number, host: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as net.AddressInfo).port;
}
