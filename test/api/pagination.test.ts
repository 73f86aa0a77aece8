import test from 'ava';
import { AppError } from '../../src/core/errors.js';
import { pageEnvelope, parsePage } from '../../src/api/pagination.js';

test('defaults are page 1, limit 25', (t) => {
  t.deepEqual(parsePage({}), { page: 1, limit: 25, offset: 0 });
  t.deepEqual(parsePage({}, { defaultLimit: 50 }), { page: 1, limit: 50, offset: 0 });
});

test('page and limit are parsed and bounded', (t) => {
  t.deepEqual(parsePage({ page: '3', limit: '10' }), { page: 3, limit: 10, offset: 20 });
  for (const q of [{ page: '0' }, { page: '-1' }, { page: 'x' }, { limit: '101' }, { limit: '0' }, { page: ['1', '2'] }]) {
    const err = t.throws(() => parsePage(q as never), { instanceOf: AppError });
    t.is(err?.code, 'BAD_REQUEST');
  }
});

test('the envelope has the resource key, totals and hasMore', (t) => {
  t.deepEqual(pageEnvelope('templates', ['a', 'b'], 5, { page: 1, limit: 2, offset: 0 }), {
    templates: ['a', 'b'],
    page: 1,
    limit: 2,
    total: 5,
    totalPage: 3,
    hasMore: true,
  });
  t.false(pageEnvelope('x', ['e'], 5, { page: 3, limit: 2, offset: 4 }).hasMore);
  t.deepEqual(pageEnvelope('x', [], 0, { page: 1, limit: 25, offset: 0 }), { x: [], page: 1, limit: 25, total: 0, totalPage: 0, hasMore: false });
});
