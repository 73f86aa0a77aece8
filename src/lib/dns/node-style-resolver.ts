import type { DnsResolver } from './dns-client.js';
import { DnsError, NODE_DNS_ERROR_CODES } from './dns-errors.js';

// The DNS client seen through node:dns's calling convention, for libraries written against it.

const NODE_SYSCALLS: Readonly<Record<string, string>> = {
  A: 'queryA',
  AAAA: 'queryAaaa',
  MX: 'queryMx',
  TXT: 'queryTxt',
  CNAME: 'queryCname',
  PTR: 'queryPtr',
};

interface NodeStyleDnsError extends Error {
  code: string;
  syscall: string;
  hostname: string;
}

function nodeStyleError(code: string, rrtype: string, hostname: string, cause?: unknown): NodeStyleDnsError {
  const syscall = NODE_SYSCALLS[rrtype] ?? 'query';
  // Same message shape as node:dns ("queryTxt ENOTFOUND example.com").
  const err = new Error(`${syscall} ${code} ${hostname}`, cause === undefined ? undefined : { cause }) as NodeStyleDnsError;
  err.code = code;
  err.syscall = syscall;
  err.hostname = hostname;
  return err;
}

/**
 * For mailauth, which calls resolver(name, rrtype) like
 * dns.promises.resolve and switches on node's err.code values (ENOTFOUND,
 * ENODATA, ETIMEOUT, ESERVFAIL, EREFUSED, ...). Shapes match node: TXT
 * string[][], MX {exchange, priority}[], A/AAAA/CNAME/PTR string[]. Types we
 * do not resolve fail with ENOTIMP, as c-ares does for unsupported queries.
 */
export function toNodeStyleResolver(r: DnsResolver): (name: string, rrtype?: string) => Promise<unknown> {
  return async (name: string, rrtype = 'A'): Promise<unknown> => {
    const type = rrtype.toUpperCase();
    try {
      switch (type) {
        case 'A':
          return (await r.resolve4(name)).records;
        case 'AAAA':
          return (await r.resolve6(name)).records;
        case 'MX':
          return (await r.resolveMx(name)).records;
        case 'TXT':
          return (await r.resolveTxt(name)).records;
        case 'CNAME':
          return (await r.resolveCname(name)).records;
        case 'PTR':
          if (r.resolvePtr) return (await r.resolvePtr(name)).records;
          break;
      }
    } catch (err) {
      if (err instanceof DnsError) throw nodeStyleError(NODE_DNS_ERROR_CODES[err.code], type, name, err);
      throw err;
    }
    throw nodeStyleError('ENOTIMP', type, name);
  };
}
