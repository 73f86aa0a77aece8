// A listener that cannot bind says which settings to change: Node's "getaddrinfo ENOTFOUND
// mail.example" or "listen EADDRNOTAVAIL" alone does not say which SMTP listener it was (the HTTP
// API names its own: api/http-server.ts listenError).

/** Starts a listener; a failed bind is rethrown named by its settings (code kept), any other error as it is. */
export async function listenNamed<T>(section: 'inbound' | 'submission', where: { host: string; port: number }, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (err) {
    const { syscall, code } = (err ?? {}) as NodeJS.ErrnoException;
    if (syscall !== 'listen' && syscall !== 'bind' && syscall !== 'getaddrinfo') throw err;
    throw Object.assign(new Error(`cannot listen on ${where.host}:${where.port} (${section}.host, ${section}.port): ${(err as Error).message}`, { cause: err }), { code });
  }
}
