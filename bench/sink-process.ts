// The benchmark's remote MX (fast-sink.ts) in a process of its own. A real MX is on another
// machine; in Posthorn's process the sink's parsing and replies ran on the event loop the
// delivery engine needs, and its CPU was counted as Posthorn's. It still shares the two
// cores, so the delivery rate stays an end-to-end figure; its CPU is reported on its own.
//
// The parent talks to it over the fork() IPC channel: the child sends {port} once
// listening, answers {type: 'onCount', n} with {type: 'count', n} once n messages were
// accepted, and {type: 'close'} with {type: 'closed', cpuMs, received} (its own CPU time, the
// messages it accepted in all).
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startFastSink } from './fast-sink.js';

type ToChild = { type: 'onCount'; n: number } | { type: 'close' };
type FromChild = { type: 'listening'; port: number } | { type: 'count'; n: number } | { type: 'closed'; cpuMs: number; received: number };

export interface SinkProcess {
  readonly port: number;
  readonly pid: number;
  /** Resolves once the sink has accepted at least n messages. */
  onCount(n: number): Promise<void>;
  /** CPU time (user + system) the sink has used so far, in ms, read when it closes. */
  close(): Promise<{ cpuMs: number; received: number }>;
}

/** extraHosts: more loopback addresses the sink listens on, at the same port (fast-sink.ts). */
export function startSinkProcess(opts: { extraHosts?: string[] } = {}): Promise<SinkProcess> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['--serve', JSON.stringify(opts.extraHosts ?? [])], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const countWaiters = new Map<number, (() => void)[]>();
  let closed: ((r: { cpuMs: number; received: number }) => void) | undefined;
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => {
      if (closed) return;
      // a benchmark waiting on a dead sink would wait forever
      process.stderr.write(`the sink process exited unexpectedly (code ${code})\n`);
      reject(new Error('sink process exited'));
      process.exit(1);
    });
    child.on('message', (m: FromChild) => {
      if (m.type === 'listening') {
        resolve({
          port: m.port,
          pid: child.pid!,
          onCount(n) {
            return new Promise<void>((done) => {
              countWaiters.set(n, [...(countWaiters.get(n) ?? []), done]);
              child.send({ type: 'onCount', n } satisfies ToChild);
            });
          },
          close() {
            return new Promise((done) => {
              closed = done;
              child.send({ type: 'close' } satisfies ToChild);
            });
          },
        });
      } else if (m.type === 'count') {
        for (const done of countWaiters.get(m.n) ?? []) done();
        countWaiters.delete(m.n);
      } else if (m.type === 'closed') {
        child.disconnect();
        closed?.({ cpuMs: m.cpuMs, received: m.received });
      }
    });
  });
}

async function serve(): Promise<void> {
  const sink = await startFastSink({ extraHosts: JSON.parse(process.argv[process.argv.indexOf('--serve') + 1] ?? '[]') as string[] });
  const send = (m: FromChild) => process.send!(m);
  process.on('message', (m: ToChild) => {
    if (m.type === 'onCount') void sink.onCount(m.n).then(() => send({ type: 'count', n: m.n }));
    else if (m.type === 'close') {
      void sink.close().then(() => {
        const cpu = process.cpuUsage();
        send({ type: 'closed', cpuMs: (cpu.user + cpu.system) / 1000, received: sink.received });
        process.disconnect();
      });
    }
  });
  send({ type: 'listening', port: sink.port });
}

if (process.argv.includes('--serve') && process.send) await serve();
