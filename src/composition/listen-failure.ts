// A listener that cannot bind says which settings to change: Node's "getaddrinfo ENOTFOUND
// mail.example" or "listen EADDRNOTAVAIL" alone does not say which of the three listeners it was.

/** Starts a listener; a failed bind is rethrown named by its settings (code kept), any other error as it is. */
export async function listenNamed<T>(section: 'http' | 'inbound' | 'submission', where: { host: string; port: number }, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (err) {
    const { syscall, code } = (err ?? {}) as NodeJS.ErrnoException;
    if (syscall !== 'listen' && syscall !== 'bind' && syscall !== 'getaddrinfo') throw err;
    throw Object.assign(new Error(`cannot listen on ${where.host}:${where.port} (${section}.host, ${section}.port): ${(err as Error).message}`, { cause: err }), { code });
  }
}
