import type { ApiResponse } from './posthorn-process.js';

// A client that sends a fixed plan of requests (batches and single sends, some with an
// Idempotency-Key) through a server that may die under it. It does what a careful user does:
// a request cut by a dead connection is sent again once the server is back, with the same
// key when it had one. Only a 200 counts as accepted.

export interface PlannedRequest {
  n: number;
  kind: 'batch' | 'single';
  key?: string;
  body: unknown;
  /** The recipient of each message, in the order of the response's ids. */
  recipients: string[];
  state: 'todo' | 'inflight' | 'accepted' | 'cut' | 'refused';
  /** How many times a dead connection cut it (it may or may not have been stored). */
  cuts: number;
  ids?: string[];
  refusal?: ApiResponse;
}

export type Api = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => Promise<ApiResponse>;

export function planRequests(opts: { batches: number; batchSize: number; singles: number; from: string; rcptDomain: string }): PlannedRequest[] {
  const plan: PlannedRequest[] = [];
  let m = 0;
  const message = () => {
    const i = m++;
    return { rcpt: `m${i}@${opts.rcptDomain}`, body: { from: opts.from, to: `m${i}@${opts.rcptDomain}`, subject: `crash message ${i}`, text: `message ${i}` } };
  };
  const singlesPerBatch = Math.ceil(opts.singles / Math.max(1, opts.batches));
  let singles = 0;
  for (let b = 0; b < opts.batches || singles < opts.singles; b++) {
    if (b < opts.batches) {
      const items = Array.from({ length: opts.batchSize }, message);
      // Every other batch carries a key.
      plan.push({ n: plan.length, kind: 'batch', key: b % 2 === 0 ? `crash-batch-${b}` : undefined, body: items.map((x) => x.body), recipients: items.map((x) => x.rcpt), state: 'todo', cuts: 0 });
    }
    for (let s = 0; s < singlesPerBatch && singles < opts.singles; s++, singles++) {
      const x = message();
      // Every third single carries a key.
      plan.push({ n: plan.length, kind: 'single', key: singles % 3 === 0 ? `crash-single-${singles}` : undefined, body: x.body, recipients: [x.rcpt], state: 'todo', cuts: 0 });
    }
  }
  return plan;
}

export function postRequest(api: Api, r: PlannedRequest): Promise<ApiResponse> {
  return api('POST', r.kind === 'batch' ? '/v1/emails/batch' : '/v1/emails', r.body, r.key ? { 'idempotency-key': r.key } : {});
}

export function idsOf(r: PlannedRequest, res: ApiResponse): string[] {
  return r.kind === 'batch' ? (res.body.data as { emailId: string }[]).map((d) => d.emailId) : [res.body.emailId as string];
}

/**
 * Sends every request not yet accepted, `concurrency` at a time, until all are answered or the
 * connection dies (then every worker stops: the server is gone; call it again after a restart).
 * Returns true when the whole plan is done.
 */
export async function sendPlan(api: Api, plan: PlannedRequest[], opts: { concurrency: number; onAnswer?: () => void }): Promise<boolean> {
  let dead = false;
  let next = 0;
  const worker = async () => {
    while (!dead) {
      while (next < plan.length && plan[next]!.state !== 'todo' && plan[next]!.state !== 'cut') next++;
      const r = plan[next];
      if (!r) return;
      r.state = 'inflight';
      try {
        const res = await postRequest(api, r);
        if (res.status === 200) {
          r.state = 'accepted';
          r.ids = idsOf(r, res);
        } else {
          r.state = 'refused';
          r.refusal = res;
        }
      } catch {
        r.state = 'cut';
        r.cuts++;
        dead = true;
      }
      opts.onAnswer?.();
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  return plan.every((r) => r.state === 'accepted' || r.state === 'refused');
}
