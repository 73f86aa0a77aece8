import { createHash } from 'node:crypto';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { TlsReportsRepository, TlsSessionCountRow } from '../../store/repositories/tls-reports-repository.js';
import type { TlsPolicyRef, TlsVerdict } from './tls-verdict.js';

/**
 * Counts every session's TLS verdict per policy domain and UTC day for the daily TLS-RPT
 * report (RFC 8460). Verdicts arrive on the delivery hot path, so they are added up in memory
 * and written in one transaction every few seconds (and at stop). A process killed between
 * two flushes loses at most that many seconds of counts: statistics, never mail.
 */
export interface TlsSessionCounter {
  record(verdicts: readonly TlsVerdict[]): void;
  /** Writes what was counted since the last flush. */
  flush(): Promise<void>;
  start(): void;
  stop(): Promise<void>;
}

const FLUSH_INTERVAL_MS = 5_000;

export function policyKey(p: TlsPolicyRef): string {
  return createHash('sha256').update(JSON.stringify([p.type, p.strings, p.mxHosts])).digest('hex').slice(0, 32);
}

export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export function createTlsSessionCounter(deps: { repo: TlsReportsRepository; clock: Clock; logger: Logger; flushIntervalMs?: number }): TlsSessionCounter {
  let pending = new Map<string, TlsSessionCountRow>();
  let timer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> = Promise.resolve();

  function record(verdicts: readonly TlsVerdict[]): void {
    if (!verdicts.length) return;
    const day = utcDay(deps.clock.nowMs());
    for (const v of verdicts) {
      if (v.sessionCounted) continue;
      const failure = v.result !== 'success';
      const row: TlsSessionCountRow = {
        policy_domain: v.policy.domain,
        day,
        policy_key: policyKey(v.policy),
        policy_type: v.policy.type,
        policy_json: JSON.stringify({ strings: v.policy.strings, mxHosts: v.policy.mxHosts }),
        result: v.result,
        // Successes are only counted; failures keep their details (RFC 8460 §4.4 failure-details).
        sending_ip: failure ? (v.sendingIp ?? '') : '',
        mx_host: failure ? v.mxHost : '',
        receiving_ip: failure ? (v.receivingIp ?? '') : '',
        reason_code: failure ? (v.reasonCode ?? '') : '',
        count: 1,
      };
      const key = [row.policy_domain, row.day, row.policy_key, row.result, row.sending_ip, row.mx_host, row.receiving_ip, row.reason_code].join('\u0000');
      const known = pending.get(key);
      if (known) known.count++;
      else pending.set(key, row);
    }
  }

  function flush(): Promise<void> {
    flushing = flushing.then(async () => {
      if (!pending.size) return;
      const rows = [...pending.values()];
      pending = new Map();
      try {
        await deps.repo.addCounts(rows);
      } catch (err) {
        // Put them back: the next flush tries again.
        for (const r of rows) {
          const key = [r.policy_domain, r.day, r.policy_key, r.result, r.sending_ip, r.mx_host, r.receiving_ip, r.reason_code].join('\u0000');
          const known = pending.get(key);
          if (known) known.count += r.count;
          else pending.set(key, r);
        }
        deps.logger.warn({ err }, 'writing TLS session counts failed; kept for the next flush');
      }
    });
    return flushing;
  }

  return {
    record,
    flush,
    start() {
      if (timer) return;
      timer = setInterval(() => void flush(), deps.flushIntervalMs ?? FLUSH_INTERVAL_MS);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
      await flush();
    },
  };
}
