import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

/** Structured JSON logs on stdout (pino). `silent` keeps test output readable. */
export function createLogger(level: string = 'info'): Logger {
  return pino({ level, base: { service: 'posthorn' }, timestamp: pino.stdTimeFunctions.isoTime });
}
