import test from 'ava';
import { timeOrderedIdLength, timePrefix } from '../../src/lib/ids.js';
import { withinBytes } from '../../src/store/repositories/content-chunks.js';
import { createEmailsRepository } from '../../src/store/repositories/emails-repository.js';
import { createRetentionRepository } from '../../src/store/repositories/retention-repository.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startTestApp } from '../helpers/test-app.js';

// Content retention's writes are bounded by the bytes they free, not only by rows: freeing a
// large value walks all of it on the thread that serves the API.

test('withinBytes keeps the leading rows that fit, and always at least one', (t) => {
  const rows = (...sizes: number[]) => sizes.map((bytes, i) => ({ i, bytes }));
  t.deepEqual(withinBytes(rows(4, 4, 4), 10).map((r) => r.i), [0, 1]);
  t.deepEqual(withinBytes(rows(4, 4, 2), 10).map((r) => r.i), [0, 1, 2], 'exactly the limit fits');
  t.deepEqual(withinBytes(rows(50, 1), 10).map((r) => r.i), [0], 'one larger item is a write of its own');
  t.deepEqual(withinBytes(rows(0, 0, 0), 0).map((r) => r.i), [0, 1, 2], 'emptied rows cost nothing');
  t.deepEqual(withinBytes([{ bytes: '6' }, { bytes: null }, { bytes: '5' }], 10), [{ bytes: '6' }, { bytes: null }], 'a driver may give sizes as text or null');
  t.deepEqual(withinBytes([], 10), []);
});

test('the scans of emails and of the kept list stop at the byte limit, in id order', async (t) => {
  const t0 = await startTestApp();
  t.teardown(() => t0.stop());
  const domain = await addVerifiedDomain(t0, 'chunks.dev');
  const text = 'x'.repeat(600_000);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    // Scheduled a year ahead: they keep their content, and nothing delivers them.
    const res = await t0.request('POST', '/v1/emails', { body: { from: `a@${domain.name}`, to: `r${i}@example.net`, subject: `Big ${i}`, text, scheduledAt: new Date(Date.now() + 365 * 86_400_000).toISOString() } });
    t.is(res.status, 200, JSON.stringify(res.body));
    ids.push(res.body.emailId);
  }
  ids.sort();
  const emails = createEmailsRepository(t0.app.store.db);
  const before = `em_${timePrefix(Date.now() + 86_400_000)}`;
  const scan = (bytes: number, after = 'em_') => emails.withContentBetween(after, before, timeOrderedIdLength('em'), { rows: 500, bytes });
  t.deepEqual(await scan(1_000_000), ids.slice(0, 1), 'two would free 1.2 MB');
  t.deepEqual(await scan(1_300_000), ids.slice(0, 2));
  t.deepEqual(await scan(1_300_000, ids[1]!), ids.slice(2), 'the next chunk goes on after the last id');
  t.deepEqual(await scan(16 * 1024 * 1024), ids);
  t.deepEqual(await emails.withContentBetween('em_', before, timeOrderedIdLength('em'), { rows: 2, bytes: 16 * 1024 * 1024 }), ids.slice(0, 2), 'rows still bound it');

  const kept = createRetentionRepository(t0.app.store.db);
  await kept.keep(ids);
  t.deepEqual(await kept.keptAfter('', { rows: 500, bytes: 1_000_000 }), ids.slice(0, 1));
  t.deepEqual(await kept.keptAfter(ids[0]!, { rows: 500, bytes: 1_300_000 }), ids.slice(1, 3));
});
