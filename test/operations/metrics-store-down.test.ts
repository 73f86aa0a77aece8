import test from 'ava';
import { createMetrics, type MetricsSources } from '../../src/core/metrics/metrics.js';

// A store that cannot be read (PostgreSQL gone, a disk error) must not take the whole scrape
// down: the process, HTTP, memory and port gauges are what an operator looks at then. The
// gauges that read the store are left out of that scrape; the next one has them again.

function sources(storeUp: () => boolean): MetricsSources {
  const read = <T>(value: T) => async () => {
    if (!storeUp()) throw new Error('connection terminated unexpectedly');
    return value;
  };
  return {
    queue: read([{ state: 'ready', domain: 'example.net', mxHost: null, count: 3 }]),
    connections: () => new Map(),
    storeFiles: read({ db: 4096, wal: 0 }),
    messageMemory: () => ({ bytes: 0, waiting: 0 }),
    intakeMemory: () => ({ bytes: 0, waiting: 0, receiving: 0, spooled: 0 }),
    bounceNotices: read({ waiting: 1, deferred: 0 }),
    port25Blocked: () => false,
    shaping: read({ holds: [{ id: 'sh_1', source: 'default', rollup: 'gmail.com', kind: 'suspend' as const, messageRate: null, reason: 'x', until: '', createdAt: '' }], sources: [] }),
  };
}

test('a scrape while the store cannot be read answers everything else, without the store-backed gauges; they come back with the store', async (t) => {
  let up = true;
  const m = createMetrics(sources(() => up));
  m.http('GET', '/v1/emails', 500, 0.01);
  const before = await m.render();
  t.regex(before, /^posthorn_queue_messages\{state="ready",provider="other"\} 3$/m);
  t.regex(before, /^posthorn_shaping_holds\{source="default",provider="google",kind="suspend"\} 1$/m);

  up = false;
  const during = await m.render();
  t.regex(during, /^posthorn_http_requests_total\{method="GET",route="\/v1\/emails",status="500"\} 1$/m);
  t.regex(during, /^posthorn_outbound_port25_blocked 0$/m);
  t.regex(during, /^process_cpu_user_seconds_total /m);
  for (const family of ['posthorn_queue_messages', 'posthorn_store_file_bytes', 'posthorn_bounce_notices_queued', 'posthorn_shaping_holds', 'posthorn_warmup_messages']) {
    t.notRegex(during, new RegExp(`^${family}[{ ]`, 'm'), `${family}: no stale or made-up sample`);
  }

  up = true;
  t.regex(await m.render(), /^posthorn_queue_messages\{state="ready",provider="other"\} 3$/m);
});
