import test from 'ava';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { publishRecords } from '../helpers/domain-fixtures.js';
import { twoTeams } from '../helpers/two-teams.js';
import { testDkimKeyPair } from '../helpers/test-keys.js';
import { createDomainService } from '../../src/core/domains/domain-service.js';
import { createDomainsRepository } from '../../src/store/repositories/domains-repository.js';
import { systemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/lib/logger.js';

// Several teams may add one name, each proving it with its own DKIM key. Each key needs a host
// of its own: two keys published at one <selector>._domainkey.<name> leave receivers to fetch
// either (RFC 6376 3.6.2.2), so one team's mail would fail DKIM at random. The first domain of a
// name keeps the server's selector; a later one gets a selector of its own.

let w: MailWorld;
let keyB: string;
test.before(async () => {
  w = await startMailWorld();
  keyB = (await twoTeams(w.t0)).b.key;
});
test.after.always(async () => {
  await w?.close();
});

async function api(method: string, path: string, key: string | undefined, body?: unknown): Promise<any> {
  const res = await w.t0.request(method, path, { key, body });
  if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}
const add = (name: string, key?: string) => api('POST', '/v1/domains', key, { name, region: 'local' });
const verify = async (d: any, key?: string): Promise<any> => {
  await api('PUT', `/v1/domains/${d.id}/verify`, key);
  return api('GET', `/v1/domains/${d.id}`, key);
};
const dkimRecord = (d: any) => d.dnsRecords.find((r: any) => r.type === 'TXT' && r.name.includes('._domainkey.'));
const selectorOf = (d: any) => dkimRecord(d).name.split('.')[0] as string;

test.serial('a single team’s domain keeps the plain selector', (t) => {
  t.is(dkimRecord(w.domain).name, 'posthorn._domainkey.sender.dev');
});

test.serial('two teams add one name: each DKIM key has its own host, and each verifies with only its own record published', async (t) => {
  const a = await add('shared.dev');
  const b = await add('shared.dev', keyB);
  t.is(dkimRecord(a).name, 'posthorn._domainkey.shared.dev', 'the first keeps the server selector');
  t.regex(selectorOf(b), /^posthorn-[a-z0-9]+$/);
  t.true(selectorOf(b).length <= 63);
  t.not(dkimRecord(b).name, dkimRecord(a).name);
  // the same host through GET (the console and the CLI show these)
  t.is(dkimRecord(await api('GET', `/v1/domains/${b.id}`, keyB)).name, dkimRecord(b).name);

  publishRecords(w.t0, a);
  t.is((await verify(a)).status, 'SUCCESS');
  const bUnpublished = await verify(b, keyB);
  t.not(bUnpublished.status, 'SUCCESS', 'A’s key does not verify B');
  t.is(bUnpublished.dkimStatus, 'PENDING');

  publishRecords(w.t0, b);
  t.is((await verify(b, keyB)).status, 'SUCCESS');
  t.is((await verify(a)).status, 'SUCCESS', 'B’s record did not displace A’s');
});

test.serial('mail of each team is signed with its own selector and passes DKIM against the zone', async (t) => {
  const before = w.sink.messages.length;
  const a = (await api('GET', '/v1/domains', undefined)).find((d: any) => d.name === 'shared.dev');
  const b = (await api('GET', '/v1/domains', keyB)).find((d: any) => d.name === 'shared.dev');
  t.truthy(a && b);
  await api('POST', '/v1/emails', undefined, { from: 'a@shared.dev', to: 'alice@example.net', subject: 'from A', text: 'A' });
  await api('POST', '/v1/emails', keyB, { from: 'b@shared.dev', to: 'alice@example.net', subject: 'from B', text: 'B' });
  await w.settle();
  const got = (await w.sink.waitForMessages(before + 2)).slice(before);
  for (const [subject, d] of [['from A', a], ['from B', b]] as const) {
    const m = got.find((x) => x.raw.toString().includes(`Subject: ${subject}`))!;
    t.truthy(m, subject);
    const sig = /^DKIM-Signature:[^]*?(?=\r\n\S)/im.exec(m.raw.toString())![0].replace(/\r\n\s+/g, ' ');
    t.regex(sig, /\bd=shared\.dev;/);
    t.regex(sig, new RegExp(`\\bs=${selectorOf(d)};`), subject);
    t.is(await w.dkimStatus(m.raw), 'pass', subject);
  }
});

test.serial('a name added after its domain was deleted does not reuse the deleted domain’s selector (its record may still be published)', async (t) => {
  const old = await add('gone.dev');
  t.is(selectorOf(old), 'posthorn');
  await api('DELETE', `/v1/domains/${old.id}`, undefined);
  const again = await add('gone.dev', keyB);
  t.not(selectorOf(again), 'posthorn');
});

test.serial('two teams adding one name at the same moment, each before the other’s row exists, still get two DKIM hosts', async (t) => {
  // Both creates read the name's holders before either inserts (a barrier in the read): each
  // picks the plain selector, and the check after the insert must part them.
  const app = w.t0.app;
  const repo = createDomainsRepository(app.store.db);
  let waiting: (() => void)[] = [];
  const domains: typeof repo = {
    ...repo,
    async dkimSelectorsOfName(name: string) {
      const taken = await repo.dkimSelectorsOfName(name);
      if (name === 'race.dev' && waiting.length < 2) {
        await new Promise<void>((resolve) => {
          waiting.push(resolve);
          if (waiting.length === 2) for (const go of waiting) go();
        });
      }
      return taken;
    },
  };
  const service = createDomainService({
    domains,
    resolver: app.resolver,
    clock: systemClock,
    events: app.services.events,
    logger: createLogger('silent'),
    hostname: 'mx.posthorn.test',
    dkimSelector: 'posthorn',
    bounceLabel: 'bounces',
    dkimKeyPair: testDkimKeyPair,
  });
  const teamB = (await api('GET', '/v1/domains/' + (await add('race-b-probe.dev', keyB)).id, keyB)).teamId;
  const [a, b] = await Promise.all([
    service.create({ teamId: w.t0.teamId, domainId: null }, { name: 'race.dev', region: 'local' }),
    service.create({ teamId: teamB, domainId: null }, { name: 'race.dev', region: 'local' }),
  ]);
  t.is(waiting.length, 2, 'both read before either inserted');
  waiting = [];
  t.not(dkimRecord(a).name, dkimRecord(b).name);
  // what a later read shows is what create answered
  t.is(dkimRecord(await api('GET', `/v1/domains/${a.id}`, undefined)).name, dkimRecord(a).name);
  t.is(dkimRecord(await api('GET', `/v1/domains/${b.id}`, keyB)).name, dkimRecord(b).name);
});
