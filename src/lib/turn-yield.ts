import { performance } from 'node:perf_hooks';

/** How long pieces of work waiting here may hold the event loop in one turn, in milliseconds. */
const TURN_BUDGET_MS = 0.5;

const waiting: (() => void)[] = [];
let draining = false;
let turnStarted = 0;
/** True from the first piece run in this turn of the event loop until the loop's next check phase. */
let inTurn = false;
/** Pieces run in this turn. */
let ranInTurn = 0;

function markTurn(): void {
  if (inTurn) return;
  inTurn = true;
  ranInTurn = 0;
  turnStarted = performance.now();
  setImmediate(() => (inTurn = false));
}

/** Runs the next waiting piece if the turn has time left, else leaves the rest for the next turn. */
function drain(): void {
  markTurn();
  // The first piece of a turn always runs: the thread descheduled (or a GC pause) between the
  // turn's start and this check must not push every piece to the next turn, and the next.
  if (ranInTurn > 0 && performance.now() - turnStarted >= TURN_BUDGET_MS) {
    setImmediate(drain);
    return;
  }
  ranInTurn++;
  waiting.shift()!();
  // Queued after the piece's continuation: runs once the piece's synchronous part has.
  queueMicrotask(() => {
    if (waiting.length) drain();
    else draining = false;
  });
}

/**
 * Work that many tasks start in the same turn (a claim round starts hundreds of deliveries,
 * each composing its message on this thread) would run back to back in microtasks, never
 * giving the event loop a turn: the API's requests would wait behind all of it. Awaited before
 * each piece, this runs the pieces in order, as many per turn of the event loop as fit in
 * TURN_BUDGET_MS, with I/O served between turns.
 */
export function yieldTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (draining) return;
    draining = true;
    queueMicrotask(drain);
  });
}
