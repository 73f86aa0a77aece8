import { performance } from 'node:perf_hooks';
import test from 'ava';
import { yieldTurn } from '../../src/lib/turn-yield.js';

function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

test.serial('pieces started in the same turn run in order, a few per turn, with the event loop served between', async (t) => {
  const order: number[] = [];
  const piece = async (i: number) => {
    await yieldTurn();
    busy(0.5);
    order.push(i);
  };
  const pieces = Array.from({ length: 40 }, (_, i) => piece(i));
  // What arrives meanwhile (a request, a timer) is served before all of them have run.
  let servedAfter = -1;
  setImmediate(() => (servedAfter = order.length));
  await Promise.all(pieces);
  t.deepEqual(order, [...Array(40).keys()]);
  t.true(servedAfter > 0 && servedAfter < 40, `served after ${servedAfter} pieces`);
});

test.serial('a piece alone runs in the same turn', async (t) => {
  await new Promise((r) => setImmediate(r)); // a fresh turn, none of its time spent
  let immediateRan = false;
  setImmediate(() => (immediateRan = true));
  await yieldTurn();
  t.false(immediateRan, 'resumed within microtasks, before the immediate queued ahead of it');
});
