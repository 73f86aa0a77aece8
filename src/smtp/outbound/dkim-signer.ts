// DKIM signing (RFC 6376) off the main event loop. One signature of a ~3 KB message costs
// about 0.75 ms of CPU (0.5 ms of it the RSA-2048 operation); the main thread also runs
// SMTP and SQLite, so signing goes to a small worker_threads pool. The signing itself
// lives in dkim-sign-worker.ts; this file only queues, dispatches and recovers.
import { WORKER_EXEC_ARGV } from '../../lib/worker-options.js';
import { Worker } from 'node:worker_threads';
import { availableParallelism } from 'node:os';
import { PrivateKeyCache, signMessage, WORKER_ROLE } from './dkim-sign-worker.js';
import type { DkimKey, SignRequest, SignResponse } from './dkim-types.js';
import { composeMessage, type ComposeInput } from './mime-builder.js';

export type { DkimKey } from './dkim-types.js';

export interface DkimSigner {
  /**
   * Returns the message with a DKIM-Signature header prepended (rsa-sha256, relaxed/relaxed,
   * RFC 6376), bare LFs turned into CRLF. Rejects with an Error if no signature could be
   * made (bad key, bad domain/selector, no From header, worker crash, signer closed).
   * The caller's buffer is copied, never detached or modified.
   */
  sign(message: Buffer, key: DkimKey): Promise<Buffer>;
  /**
   * Builds the MIME message (nodemailer) and signs it, both off the main thread: composing
   * costs about as much CPU as signing, and the delivery engine's thread is the bottleneck.
   * An HTML-only message's plain-text alternative (`textFromHtml`) is made there too.
   */
  composeAndSign(input: ComposeInput, key: DkimKey): Promise<Buffer>;
  close(): Promise<void>;
}

export interface DkimSignerOptions {
  /**
   * Worker threads; default: one less than the cores (defaultSigningWorkers). 0 signs in the
   * calling thread (CLI tools, tests), blocking it while it signs.
   */
  workers?: number;
  /** Worker entry override, for tests that need a worker that misbehaves. */
  workerScript?: URL;
}

/**
 * The main thread (HTTP, SMTP sessions, the store) is the busiest thread and needs a core of its
 * own; the workers get the rest. More would only compete with it for memory, CPU and the API's
 * tail latency, for no more mail delivered (docs/benchmarks.md).
 */
export function defaultSigningWorkers(cores = availableParallelism()): number {
  return Math.max(1, Math.min(8, cores - 1));
}
/**
 * Jobs a worker may hold at once. The main thread hands out the next job only when a result
 * comes back, and under load it is busy for milliseconds at a time (a claim of 500 rows, a
 * group commit): with only 2 jobs in hand a worker sat idle until the main thread got round
 * to it. With 16 it always has the next message; in the delivery benchmark the workers went
 * from 1.5-1.7 to 1.97 busy cores and delivery from ~600 to ~750 messages/s (interleaved
 * runs). A crash costs at most this many jobs, which the engine defers and retries. The rest
 * waits in the FIFO queue, so the oldest message is still signed first.
 */
export const MAX_JOBS_PER_WORKER = 16;
/**
 * ...but only while the messages a worker holds add up to less than this: each job's input is
 * copied into the worker, and a burst of messages with 30 MB of attachments each should not
 * put 16 copies per worker in memory. A worker with nothing in hand always takes the next job.
 */
export const MAX_BYTES_PER_WORKER = 16 * 1024 * 1024;
const DEFAULT_WORKER_SCRIPT = new URL('./dkim-sign-worker.js', import.meta.url);

export function createDkimSigner(opts: DkimSignerOptions = {}): DkimSigner {
  const workers = opts.workers ?? defaultSigningWorkers();
  if (!Number.isInteger(workers) || workers < 0) {
    throw new RangeError(`DKIM signer workers must be a non-negative integer, got ${workers}`);
  }
  return workers === 0 ? new InThreadSigner() : new WorkerPoolSigner(workers, opts.workerScript ?? DEFAULT_WORKER_SCRIPT);
}

function assertMessage(message: unknown): asserts message is Buffer {
  if (!(message instanceof Uint8Array)) throw new TypeError('DKIM sign: message must be a Buffer');
}

const closedError = () => new Error('DKIM signer is closed');

/** What a compose job copies into the worker, roughly: bodies and attachments (base64 text). */
function inputBytes(input: ComposeInput): number {
  let n = (input?.text?.length ?? 0) + (input?.html?.length ?? 0) + (input?.textFromHtml?.length ?? 0);
  for (const a of input?.attachments ?? []) n += a?.content?.length ?? 0;
  return n;
}

/** `workers: 0`: signs synchronously in the caller's thread. */
class InThreadSigner implements DkimSigner {
  private readonly keys = new PrivateKeyCache();
  private closed = false;

  async sign(message: Buffer, key: DkimKey): Promise<Buffer> {
    if (this.closed) throw closedError();
    assertMessage(message);
    const signed = signMessage(Buffer.from(message.buffer, message.byteOffset, message.byteLength), key, this.keys);
    return Buffer.concat([Buffer.from(signed.signatureHeader + '\r\n', 'latin1'), signed.message]);
  }

  async composeAndSign(input: ComposeInput, key: DkimKey): Promise<Buffer> {
    return this.sign(await composeMessage(input), key);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

interface Job {
  id: number;
  /** A private copy of the caller's bytes in an ArrayBuffer of exactly its size, to transfer. */
  message: ArrayBuffer;
  /** When set, the worker composes the message from this (and `message` is empty). */
  compose?: ComposeInput;
  /** About how many bytes the job hands the worker (the message, or the input's bodies and attachments). */
  bytes: number;
  key: DkimKey;
  resolve(signed: Buffer): void;
  reject(err: Error): void;
}

interface Slot {
  worker: Worker;
  jobs: Map<number, Job>;
  /** Sum of the held jobs' `bytes`. */
  bytes: number;
  /** The last 'error' event: an uncaught exception in the worker, reported with its exit. */
  lastError?: Error;
}

class WorkerPoolSigner implements DkimSigner {
  private readonly queue: Job[] = [];
  /** Index of the next job to dispatch; the queue is compacted when it drains. */
  private head = 0;
  private readonly slots = new Set<Slot>();
  private nextId = 1;
  private closed = false;
  private closing?: Promise<void>;

  constructor(
    private readonly size: number,
    private readonly script: URL,
  ) {}

  sign(message: Buffer, key: DkimKey): Promise<Buffer> {
    if (this.closed) return Promise.reject(closedError());
    try {
      assertMessage(message);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    // Copy now, not at dispatch: the caller keeps its buffer (and may reuse it), and the
    // copy owns its whole ArrayBuffer, so it moves to the worker without a second copy.
    // Transferring the caller's own buffer instead would detach it under the caller, and a
    // pooled Buffer can not be transferred at all.
    const copy = new Uint8Array(message.byteLength);
    copy.set(message);
    return new Promise<Buffer>((resolve, reject) => {
      this.queue.push({ id: this.nextId++, message: copy.buffer, bytes: copy.byteLength, key: { domain: key?.domain, selector: key?.selector, privateKey: key?.privateKey }, resolve, reject });
      this.pump();
    });
  }

  composeAndSign(input: ComposeInput, key: DkimKey): Promise<Buffer> {
    if (this.closed) return Promise.reject(closedError());
    return new Promise<Buffer>((resolve, reject) => {
      this.queue.push({ id: this.nextId++, message: new ArrayBuffer(0), compose: input, bytes: inputBytes(input), key: { domain: key?.domain, selector: key?.selector, privateKey: key?.privateKey }, resolve, reject });
      this.pump();
    });
  }

  /** Hands queued jobs, oldest first, to the least busy worker, spawning workers up to the pool size. */
  private pump(): void {
    while (this.head < this.queue.length) {
      let slot: Slot | undefined;
      let spawnError: Error | undefined;
      try {
        slot = this.pickSlot(this.queue[this.head]!);
      } catch (err) {
        spawnError = err as Error; // new Worker() threw: nothing to wait for, fail this job
      }
      if (!slot && !spawnError) break;
      const job = this.queue[this.head]!;
      this.queue[this.head++] = undefined as unknown as Job; // let the job go once settled
      if (slot) this.dispatch(slot, job);
      else job.reject(new Error(`DKIM sign: could not start a worker: ${spawnError!.message}`, { cause: spawnError }));
    }
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
  }

  private pickSlot(job: Job): Slot | undefined {
    let best: Slot | undefined;
    for (const slot of this.slots) {
      const room = slot.jobs.size === 0 || (slot.jobs.size < MAX_JOBS_PER_WORKER && slot.bytes + job.bytes <= MAX_BYTES_PER_WORKER);
      if (room && (!best || slot.jobs.size < best.jobs.size)) best = slot;
    }
    // Spawned lazily, when there is work: a worker that dies at start (say the script is
    // missing) then fails the jobs handed to it, instead of respawning in a loop.
    if ((!best || best.jobs.size > 0) && this.slots.size < this.size) best = this.spawn();
    return best;
  }

  private spawn(): Slot {
    // A signing job's garbage is short-lived and small: a young generation of 8 MB (V8's
    // default grows to 48) keeps each worker's resident memory down at no measurable CPU.
    const worker = new Worker(this.script, { workerData: { role: WORKER_ROLE }, execArgv: WORKER_EXEC_ARGV, resourceLimits: { maxYoungGenerationSizeMb: 8 } });
    const slot: Slot = { worker, jobs: new Map(), bytes: 0 };
    this.slots.add(slot);
    worker.on('message', (response: SignResponse) => this.settle(slot, response));
    worker.on('error', (err) => {
      slot.lastError = err;
    });
    worker.on('messageerror', (err) => {
      // a reply that could not be deserialized leaves a job that would never settle: treat
      // it as a crash, so onExit rejects what the worker holds and a fresh one takes over
      slot.lastError = err;
      void worker.terminate();
    });
    worker.on('exit', (code) => this.onExit(slot, code));
    worker.unref();
    return slot;
  }

  private dispatch(slot: Slot, job: Job): void {
    slot.jobs.set(job.id, job);
    slot.bytes += job.bytes;
    // only a worker with work keeps the process alive: a signer nobody closed must not
    // hang a CLI command, while a pending sign() must not be cut off by process exit
    slot.worker.ref();
    const request: SignRequest = { id: job.id, message: job.message, compose: job.compose, key: job.key };
    try {
      slot.worker.postMessage(request, [job.message]);
    } catch (err) {
      // e.g. a key field that can not be cloned
      slot.jobs.delete(job.id);
      slot.bytes -= job.bytes;
      this.idle(slot);
      job.reject(new Error(`DKIM sign: could not hand the job to a worker: ${(err as Error).message}`));
    }
  }

  /**
   * A worker with nothing in hand stops holding the process open; but not once close() began:
   * it ref()s every worker so that their exits keep the loop alive until close() settles, and
   * a reply that lands after that (the job finished as terminate() was on its way) unref'ing
   * the worker again would let the process end with close() still pending.
   */
  private idle(slot: Slot): void {
    if (slot.jobs.size === 0 && !this.closed) slot.worker.unref();
  }

  private settle(slot: Slot, response: SignResponse): void {
    const job = slot.jobs.get(response.id);
    if (!job) return;
    slot.jobs.delete(response.id);
    slot.bytes -= job.bytes;
    this.idle(slot);
    if (response.ok) job.resolve(Buffer.from(response.signed));
    else job.reject(new Error(response.error));
    this.pump();
  }

  private onExit(slot: Slot, code: number): void {
    this.slots.delete(slot);
    const reason = this.closed
      ? closedError()
      : new Error(`DKIM sign worker exited unexpectedly (exit code ${code})${slot.lastError ? `: ${slot.lastError.message}` : ''}`, { cause: slot.lastError });
    for (const job of slot.jobs.values()) job.reject(reason);
    slot.jobs.clear();
    slot.bytes = 0;
    // the queue waits for a replacement, spawned by pump() if there is work
    if (!this.closed) this.pump();
  }

  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.closed = true;
    const err = closedError();
    for (let i = this.head; i < this.queue.length; i++) this.queue[i]!.reject(err);
    this.queue.length = 0;
    this.head = 0;
    // In-flight jobs are rejected by onExit once terminate() has stopped their worker.
    // ref() first: the exit of an idle (unref'd) worker would not hold the event loop, and
    // a process could end with the awaited close() never settled.
    this.closing = Promise.all(
      [...this.slots].map((slot) => {
        slot.worker.ref();
        return slot.worker.terminate();
      }),
    ).then(() => undefined);
    return this.closing;
  }
}
