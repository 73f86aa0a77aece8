import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import type { DnsResolver } from '../../src/lib/dns/dns-client.js';
import { testStoreKind } from '../helpers/pg-databases.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// A domain's isVerifying says a DNS check is under way. A process killed in the middle of one
// (or whose check's last write failed) leaves the flag set; nothing would clear it before the
// domain's next check (a day for a verified one). Here a check is held in its DKIM lookup (the
// injected resolver answers when the test lets it) and the process that runs it is taken for
// gone: the flag must not outlive what a check can last, nor a restart of the only node.

const clock = new ManualClock(Date.UTC(2026, 10, 27, 9, 0, 0));
interface Hold {
  /** Resolves once the lookup is asked. */
  reached: Promise<void>;
  release: () => void;
}
const held = new Map<string, Hold & { gate: Promise<void>; arrive: () => void }>();
/** Holds the TXT lookups of `name` until release(). */
function hold(name: string): Hold {
  let release!: () => void;
  let arrive!: () => void;
  const h = { gate: new Promise<void>((resolve) => (release = resolve)), reached: new Promise<void>((resolve) => (arrive = resolve)), release: () => release(), arrive: () => arrive() };
  held.set(name, h);
  return h;
}
const holding = (base: DnsResolver): DnsResolver => ({
  ...base,
  async resolveTxt(name) {
    const h = held.get(name);
    if (h) {
      h.arrive();
      await h.gate;
    }
    return base.resolveTxt(name);
  },
});

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp({ clock, resolver: holding, overrides: { cluster: { nodeName: 'first' } } });
});
test.after.always(async () => {
  for (const h of held.values()) h.release();
  await t0?.close();
});

const domainOf = async (app: TestApp, id: number) => (await app.request('GET', `/v1/domains/${id}`)).body;

test.serial('a verifying flag older than a check can last reads as not verifying', async (t) => {
  const d = (await t0.request('POST', '/v1/domains', { body: { name: 'stuck-check.org', region: 'r' } })).body;
  const h = hold('posthorn._domainkey.stuck-check.org');
  const verifying = t0.request('PUT', `/v1/domains/${d.id}/verify`);
  await h.reached;
  t.true((await domainOf(t0, d.id)).isVerifying, 'a check under way shows');
  // The node running it is gone (killed, cut off): its check will never write its end.
  clock.advance(11 * 60_000);
  t.false((await domainOf(t0, d.id)).isVerifying, 'no check can still be under way after this long');
  h.release();
  t.is((await verifying).status, 200);
  t.false((await domainOf(t0, d.id)).isVerifying);
});

test.serial('a check of a process that died: after a restart on SQLite it is not verifying; another live node sees it', async (t) => {
  const d = (await t0.request('POST', '/v1/domains', { body: { name: 'killed-check.org', region: 'r' } })).body;
  const h = hold('posthorn._domainkey.killed-check.org');
  const verifying = t0.request('PUT', `/v1/domains/${d.id}/verify`);
  await h.reached;
  // A second process on the same store: on SQLite it is the restart of the one node (the first
  // stands for the process that died); on PostgreSQL another node, while the first lives.
  const next = await startTestApp({ clock, dataDir: t0.dataDir, zone: t0.zone, overrides: { cluster: { nodeName: 'second' } } });
  try {
    (next as { key: string }).key = t0.key;
    const seen = await domainOf(next, d.id);
    if (testStoreKind() === 'postgres') t.true(seen.isVerifying, 'the check of a live node shows on the others');
    else t.false(seen.isVerifying, 'one node: nothing is verifying when it starts');
  } finally {
    h.release();
    t.is((await verifying).status, 200);
    await next.stop();
  }
});
