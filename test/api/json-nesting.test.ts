import test from 'ava';
import { nestingExceeds } from '../../src/api/http-server.js';

const nest = (depth: number, open = '[', close = ']') => open.repeat(depth) + close.repeat(depth);

test('nesting at the limit passes, one level more does not', (t) => {
  t.false(nestingExceeds(nest(4), 4));
  t.true(nestingExceeds(nest(5), 4));
  t.false(nestingExceeds(`{"a":{"b":{"c":{"d":1}}}}`, 4));
  t.true(nestingExceeds(`{"a":{"b":{"c":{"d":{"e":1}}}}}`, 4));
});

test('many brackets side by side are not depth: the walk runs and finds the body shallow', (t) => {
  // More openers than the limit, so the count alone can not decide.
  const wide = `[${Array.from({ length: 50 }, () => '{"a":[1]}').join(',')}]`;
  t.false(nestingExceeds(wide, 4));
  t.true(nestingExceeds(`[${wide}, ${nest(4)}]`, 4));
});

test('brackets inside strings do not count, escaped quotes included', (t) => {
  const inString = JSON.stringify({ text: `${'{['.repeat(300)} \\" ${'['.repeat(300)}` });
  t.false(nestingExceeds(inString, 4));
  t.true(nestingExceeds(`{"text":"a \\" [[[[[[ b","x":${nest(4)}}`, 4));
  t.false(nestingExceeds(`{"text":"a \\" [[[[[[ b","x":${nest(3)}}`, 4));
});
