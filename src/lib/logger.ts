import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

export interface LoggerOptions {
  /**
   * Where the JSON lines go: stdout for the server, stderr for the admin commands, whose stdout
   * is their result (a key, a table) and must not be interleaved with log lines.
   */
  destination?: 'stdout' | 'stderr';
}

/** Structured JSON logs (pino), one object per line. `silent` keeps test output readable. */
export function createLogger(level: string = 'info', opts: LoggerOptions = {}): Logger {
  const dest = pino.destination({ dest: opts.destination === 'stderr' ? 2 : 1, sync: true });
  return pino({ level, base: { service: 'posthorn' }, timestamp: pino.stdTimeFunctions.isoTime }, dest);
}
