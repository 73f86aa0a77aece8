import test from 'ava';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { until } from '../helpers/until.js';

// A domain deleted while its DNS check runs (the lookups of a slow resolver take seconds): the
// API's verify answers 404 like for any missing domain, and the scheduled re-check skips it
// without a warning or a "checked" line for a domain that is no longer there.

const lines: any[] = [];
const stream = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(l));
    done();
  },
});
const logger = pino({ level: 'debug', base: { service: 'posthorn' } }, stream);

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp({ logger });
});
test.after.always(async () => {
  await t0?.close();
});

/** Adds a domain whose DKIM lookup goes unanswered (it times out) until the test deletes it. */
async function addSlowDomain(name: string): Promise<{ id: number; dkimHost: string }> {
  const created = (await t0.request('POST', '/v1/domains', { body: { name, region: 'r' } })).body;
  const dkimHost = `posthorn._domainkey.${name}`;
  t0.zone.blackhole(dkimHost);
  return { id: created.id, dkimHost };
}

test.serial('verify of a domain deleted during its DNS lookups is 404, not 500', async (t) => {
  const d = await addSlowDomain('deleted-mid-verify.org');
  const verifying = t0.request('PUT', `/v1/domains/${d.id}/verify`);
  await until(() => t0.zone.queriesFor(d.dkimHost, 'TXT') > 0);
  t.is((await t0.request('DELETE', `/v1/domains/${d.id}`)).status, 200);
  const res = await verifying;
  t.is(res.status, 404, JSON.stringify(res.body));
  t.is(res.body.error.code, 'NOT_FOUND');
  t.false(lines.some((l) => l.level >= 50), JSON.stringify(lines.filter((l) => l.level >= 50)));
});

test.serial('the scheduled re-check skips a domain deleted during its DNS lookups, quietly', async (t) => {
  const d = await addSlowDomain('deleted-mid-recheck.org');
  const before = lines.length;
  const rechecking = t0.app.services.domains.recheck(false);
  await until(() => t0.zone.queriesFor(d.dkimHost, 'TXT') > 0);
  t.is((await t0.request('DELETE', `/v1/domains/${d.id}`)).status, 200);
  await t.notThrowsAsync(rechecking);
  const after = lines.slice(before);
  t.false(after.some((l) => l.level >= 40), JSON.stringify(after.filter((l) => l.level >= 40)));
  t.false(after.some((l) => l.event === 'domain.verification' && l.domainId === d.id), 'no "checked" line for a deleted domain');
});
