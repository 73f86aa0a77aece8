import type { Command } from 'commander';
import { configFrom } from './cli-context.js';
import { serve } from '../main.js';

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run Posthorn: the HTTP API, the SMTP listeners, the delivery engine and the scheduler')
    .action(async (_opts, cmd: Command) => {
      await serve(configFrom(cmd));
    });
}
