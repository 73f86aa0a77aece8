/**
 * Waits for a condition the server reaches on its own, with no event to wait on (a budget's
 * queue filling), looking again every turn of the event loop: no fixed sleep.
 */
export async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((r) => setImmediate(r));
}
