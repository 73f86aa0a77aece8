import { Writable } from 'node:stream';
import { pino } from 'pino';

/**
 * A debug logger whose JSON lines the test reads: `lines` keeps them all, and `onLine` (which the
 * test may replace at any time) is called with each one as it is written.
 */
export function capturedLog() {
  const log = {
    lines: [] as any[],
    onLine: (_line: any): void => undefined,
    logger: pino(
      { level: 'debug', base: { service: 'posthorn' } },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) {
            const line = JSON.parse(l);
            log.lines.push(line);
            log.onLine(line);
          }
          done();
        },
      }),
    ),
  };
  return log;
}

export type CapturedLog = ReturnType<typeof capturedLog>;

/**
 * Stops an app whose cron job is held (at `release`'s gate): the job is let go once the stop
 * waits for it (its `cron.waiting` line), or once the stop has ended without waiting.
 */
export function stopWhileHeld(stop: () => Promise<void>, log: CapturedLog, release: () => void): Promise<void> {
  log.onLine = (line) => {
    if (line.event === 'cron.waiting') release();
  };
  const stopping = stop();
  void stopping.then(release, release);
  return stopping;
}
