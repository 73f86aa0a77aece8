import test from 'ava';
import { capturedLog, stopWhileHeld } from '../helpers/captured-log.js';
import { heldTxtLookup } from '../helpers/held-txt-lookup.js';
import { publishRecords } from '../helpers/domain-fixtures.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// A graceful stop while a cron job is under way: the domain re-check is held in a DNS lookup
// (the injected resolver answers only when the test lets it). The stop waits for the check in
// progress and records it, starts no further domain, and closes the store only then: no write
// meets a closed store. The next start carries the run on.

const log = capturedLog();
const { lines, logger } = log;

/** The domain re-check held in one domain's lookup. */
const held = heldTxtLookup();

let t0: TestApp;
let after: TestApp | undefined;
test.before(async () => {
  t0 = await startTestApp({ logger, resolver: held.resolver });
});
test.after.always(async () => {
  await after?.close();
  await t0?.close();
});

test.serial('a stop during the domain re-check waits for the domain under way, records it, and starts no other', async (t) => {
  const ids: number[] = [];
  for (const name of ['first-recheck.org', 'held-recheck.org', 'last-recheck.org']) {
    const created = await t0.request('POST', '/v1/domains', { body: { name, region: 'r' } });
    t.is(created.status, 200, JSON.stringify(created.body));
    publishRecords(t0, created.body);
    ids.push(created.body.id);
  }
  held.name = 'posthorn._domainkey.held-recheck.org';
  const run = t0.app.runCronJob('recheck-unverified-domains');
  await held.reached; // the first domain is checked; the second is in its lookups
  const fromStop = lines.length;
  // The lookup is let go once the stop has done what it can without the job: waiting for it, or
  // (had it not waited) closed the store.
  const stopping = stopWhileHeld(() => t0.stop(), log, held.release);
  await t.notThrowsAsync(stopping);
  t.true(await run);
  const problems = lines.slice(fromStop).filter((l) => l.level >= 40);
  t.deepEqual(problems, [], 'no write met a closed store');

  const stopped = lines.find((l) => l.msg === 'cron job finished' && l.job === 'recheck-unverified-domains');
  t.is(stopped?.result, 2, 'no domain was started after the stop');

  // The next start carries the run on: the domain it did not get to, and none it checked.
  const carriedOn = new Promise<any>((resolve) => {
    log.onLine = (line) => {
      if (line.msg === 'cron job finished' && line.job === 'recheck-unverified-domains') resolve(line);
    };
  });
  after = await startTestApp({ dataDir: t0.dataDir, zone: t0.zone, logger });
  t.is((await carriedOn).result, 1);
  const [first, heldDomain, last] = await Promise.all(ids.map(async (id) => (await after!.request('GET', `/v1/domains/${id}`)).body));
  t.like(first, { status: 'SUCCESS', isVerifying: false });
  t.like(heldDomain, { status: 'SUCCESS', isVerifying: false }, 'the check under way when the stop came was recorded');
  t.like(last, { status: 'SUCCESS', isVerifying: false }, 'checked by the run carried on');
});
