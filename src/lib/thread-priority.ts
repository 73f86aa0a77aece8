import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/*
 * On a machine with fewer cores than busy threads, the kernel shares the cores out evenly: the
 * main thread (the event loop that answers the API and drives every SMTP session) then waits in
 * the run queue behind throughput work that nobody waits on by the millisecond. Measured in the
 * realistic bench on 2 cores: the main thread spent a seventh to a quarter of its wall time
 * runnable but not running. A worker that does such work lowers its own priority, so the event loop runs
 * first and the worker takes whatever CPU is left (all of it when the loop is idle).
 *
 * Linux only: there a thread has its own nice value, and setpriority() on a thread id sets it
 * for that thread alone. Elsewhere (or without /proc) this does nothing: the process keeps
 * working, just without the preference.
 */

/**
 * How much nicer than the process a background worker runs (nice values go up to 19). At +5 the
 * kernel gives the worker about a quarter of a core it contends for with a thread at the
 * process's own priority: the event loop goes first, yet a busy neighbour process cannot starve
 * delivery (+10 would leave it a tenth, and measured no better for the API's tail).
 */
export const BACKGROUND_NICE_DELTA = 5;

/** The calling thread's kernel id, or undefined where threads have none we can name. */
export function currentThreadId(): number | undefined {
  if (process.platform !== 'linux') return undefined;
  try {
    // "/proc/thread-self" links to "<pid>/task/<tid>"
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isInteger(tid) && tid > 0 ? tid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Makes the calling thread `delta` nicer than it is now (capped at 19). Returns the new nice
 * value, or undefined when the platform does not allow it; never throws (a worker must start
 * whatever the platform).
 */
export function lowerThreadPriority(delta = BACKGROUND_NICE_DELTA): number | undefined {
  const tid = currentThreadId();
  if (tid === undefined) return undefined;
  try {
    const nice = Math.min(19, getPriority(tid) + delta);
    setPriority(tid, nice);
    return getPriority(tid);
  } catch {
    return undefined;
  }
}
