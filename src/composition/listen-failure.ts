// A listener that cannot bind says which settings to change: Node's "getaddrinfo ENOTFOUND
// mail.example" or "listen EADDRNOTAVAIL" alone does not say which of the three listeners it was.

/** The error of a failed bind, named by the listener's settings; any other error as it is. */
export function namedListenError(section: 'http' | 'inbound' | 'submission', where: { host: string; port: number }, err: unknown): unknown {
  const syscall = (err as NodeJS.ErrnoException | undefined)?.syscall;
  if (syscall !== 'listen' && syscall !== 'bind' && syscall !== 'getaddrinfo') return err;
  const named = new Error(`cannot listen on ${where.host}:${where.port} (${section}.host, ${section}.port): ${(err as Error).message}`, { cause: err });
  return Object.assign(named, { code: (err as NodeJS.ErrnoException).code });
}
