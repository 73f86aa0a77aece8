import { DnsError, type DnsResolver } from '../../lib/dns/dns-client.js';
import { toNodeStyleResolver } from '../../lib/dns/node-style-resolver.js';

// What a receiver's SPF check (RFC 7208) makes of mail from one of this server's addresses with
// the return-path host as MAIL FROM domain. mailauth evaluates it (include:, redirect=, ip4/ip6
// with CIDR, a, mx, exists, ptr, macros, the 10-lookup and 2-void-lookup limits, which also end
// include and redirect loops), through our resolver like every lookup here.

export type SpfVerdict = 'pass' | 'fail' | 'softfail' | 'neutral' | 'none' | 'permerror' | 'temperror';

export interface SpfEvaluation {
  ip: string;
  verdict: SpfVerdict;
  /** mailauth's reason for a permerror or temperror ("Too many DNS requests"), else null. */
  reason: string | null;
}

interface SpfModule {
  spf(opts: { sender: string; ip: string; helo: string; mta: string; resolver: (name: string, rrtype?: string) => Promise<unknown> }): Promise<{ status: { result: string; comment?: string } }>;
}

let spfModule: Promise<SpfModule> | undefined;

/** Loaded on the first check (mailauth pulls in a validator most processes never need here). */
const loadSpf = (): Promise<SpfModule> => (spfModule ??= import('mailauth/lib/spf/index.js') as Promise<SpfModule>);

/** Evaluates host's SPF record for ip. Never throws: a lookup that failed for a while is temperror. */
export async function evaluateSpf(resolver: DnsResolver, host: string, hostname: string, ip: string): Promise<SpfEvaluation> {
  const nodeStyle = toNodeStyleResolver(resolver);
  let temporary = false;
  // mailauth skips an include: whose lookup failed with SERVFAIL as if it did not match; a
  // receiver would answer temperror, so any temporary failure on the way makes a non-pass one.
  const watched = async (name: string, rrtype?: string): Promise<unknown> => {
    try {
      return await nodeStyle(name, rrtype);
    } catch (err) {
      const cause = (err as { cause?: unknown }).cause;
      if (cause instanceof DnsError && cause.temporary) temporary = true;
      throw err;
    }
  };
  try {
    const { spf } = await loadSpf();
    const res = await spf({ sender: `postmaster@${host}`, ip, helo: hostname, mta: hostname, resolver: watched });
    const verdict = res.status.result as SpfVerdict;
    if (verdict !== 'pass' && temporary) return { ip, verdict: 'temperror', reason: 'a DNS lookup failed temporarily' };
    const reason = verdict === 'permerror' || verdict === 'temperror' ? afterLookupOf(res.status.comment ?? '') : null;
    return { ip, verdict, reason };
  } catch (err) {
    return { ip, verdict: 'temperror', reason: (err as Error).message };
  }
}

/** mailauth's comment is "<mta>: ... during lookup of <sender>: <text>"; the text is the reason. */
function afterLookupOf(comment: string): string | null {
  const m = /during lookup of \S+?: (.+)$/.exec(comment);
  return m ? m[1]! : comment || null;
}
