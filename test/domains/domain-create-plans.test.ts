import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { plans, recording, scans } from '../helpers/statement-plans.js';

// Adding a domain looks up every domain of that name, deleted ones included (their DKIM records
// may still be published, dkim-selectors.ts), and the name's owners: through an index, not by
// reading every domain the server has ever had.

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp({ makeDkimKeys: true });
});
test.after.always(async () => {
  await t0?.close();
});

test('creating and deleting domains reads the domains table through its indexes', async (t) => {
  const first = await t0.request('POST', '/v1/domains', { body: { name: 'plans-one.com', region: 'local' } });
  t.is(first.status, 200);
  t.is((await t0.request('DELETE', `/v1/domains/${first.body.id}`)).status, 200);
  const ran = await recording(t0, async () => {
    const again = await t0.request('POST', '/v1/domains', { body: { name: 'plans-one.com', region: 'local' } });
    if (again.status !== 200) throw new Error(JSON.stringify(again.body));
  });
  const explained = (await plans(t0, ran)).filter((p) => /\bfrom "?domains"?\b/i.test(p.sql));
  t.true(explained.length > 0, 'the create read the domains table');
  for (const p of explained) t.deepEqual(scans(p.plan), [], `${p.sql}\n${p.plan.join('\n')}`);
});
