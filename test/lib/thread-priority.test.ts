import { readdirSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import test, { type ExecutionContext } from 'ava';
import BetterSqlite3 from 'better-sqlite3';
import { BACKGROUND_NICE_DELTA, currentThreadId } from '../../src/lib/thread-priority.js';
import { createDkimSigner } from '../../src/smtp/outbound/dkim-signer.js';
import { startWalCheckpointer } from '../../src/store/wal-checkpointer.js';
import { tempDir } from '../helpers/temp-dir.js';
import { generateRsaKey, plainMessage } from '../smtp/mime/fixtures/dkim-test-kit.js';

// Threads have nice values of their own on Linux only; elsewhere the module does nothing.
const linuxTest = process.platform === 'linux' ? test.serial : test.serial.skip;

/** Every thread of this process and its nice value (field 19 of /proc/self/task/<tid>/stat). */
function threadNices(): Map<number, number> {
  const nices = new Map<number, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      // the name (field 2) is in parentheses and may hold spaces: count fields after it
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      nices.set(Number(tid), Number(fields[19 - 3]));
    } catch {
      // the thread ended while we listed them
    }
  }
  return nices;
}

function threadsAt(nice: number): number {
  return [...threadNices().values()].filter((n) => n === nice).length;
}

function ownNice(): number {
  return getPriority(currentThreadId()!);
}

/** Starts a worker that lowers its own priority by `delta`; it runs (its thread exists) until the test ends. */
async function niceWorker(t: ExecutionContext, delta: number): Promise<{ tid: number; nice: number }> {
  const moduleUrl = new URL('../../src/lib/thread-priority.js', import.meta.url).href;
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     import(workerData.moduleUrl).then((m) => {
       parentPort.postMessage({ tid: m.currentThreadId(), nice: m.lowerThreadPriority(workerData.delta) });
       parentPort.once('message', () => undefined); // alive until terminated: the test reads its thread
     });`,
    { eval: true, workerData: { moduleUrl, delta } },
  );
  t.teardown(() => worker.terminate());
  return new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
}

linuxTest('a worker thread lowers its own priority and no other thread’s', async (t) => {
  const before = ownNice();
  const { tid, nice } = await niceWorker(t, 3);
  t.not(tid, currentThreadId(), 'the worker has a thread id of its own');
  t.is(nice, Math.min(19, before + 3));
  t.is(threadNices().get(tid), nice, 'the kernel reports the worker thread at its new nice value');
  t.is(ownNice(), before, 'the calling thread keeps its priority');
});

linuxTest('the nice value stops at 19', async (t) => {
  const { tid, nice } = await niceWorker(t, 50);
  t.is(nice, 19);
  t.is(threadNices().get(tid), 19);
});

linuxTest('the DKIM signing worker runs nicer than the event loop', async (t) => {
  const expected = Math.min(19, ownNice() + BACKGROUND_NICE_DELTA);
  const before = threadsAt(expected);
  const signer = createDkimSigner({ workers: 1 });
  t.teardown(() => signer.close());
  await signer.sign(plainMessage(), generateRsaKey());
  t.is(threadsAt(expected), before + 1, 'one more thread at the background priority: the signing worker');
  t.is(ownNice(), expected - BACKGROUND_NICE_DELTA, 'the event loop keeps its priority');
});

linuxTest('the WAL checkpoint worker runs nicer than the event loop', async (t) => {
  const expected = Math.min(19, ownNice() + BACKGROUND_NICE_DELTA);
  const file = join(tempDir(t, 'posthorn-nice-'), 'store.sqlite');
  const db = new BetterSqlite3(file);
  db.pragma('journal_mode = WAL');
  db.exec('create table t (x)');
  t.teardown(() => db.close());
  const before = threadsAt(expected);
  const checkpointer = startWalCheckpointer(file, { intervalMs: 60_000 });
  t.teardown(() => checkpointer.stop());
  const report = checkpointer.nextCheckpoint();
  checkpointer.checkpointNow();
  t.true((await report).ok);
  t.is(threadsAt(expected), before + 1, 'one more thread at the background priority: the checkpointer');
});
