import { createApp } from '../../../src/app.js';
import { loadConfig } from '../../../src/config/load.js';
import type { BusEvent } from '../../../src/core/events.js';

// A child process for webhook-outbox-kill.test.ts: the app as `posthorn serve` builds it, plus
// one trap. With POSTHORN_TEST_KILL_ON=<event type>, the first bus event of that type is met by
// a SIGKILL to this very process, right after the state change it reports has committed and
// before any bus handler runs: exactly the window between a commit and its after-commit work.
// (A replaced emit: the trap runs before the handlers the app registered while it was built.)

const killOn = process.env.POSTHORN_TEST_KILL_ON;
const app = await createApp({ config: loadConfig({ configFile: process.argv[2] }) });
if (killOn) {
  const events = app.services.events;
  const emit = events.emit.bind(events);
  events.emit = (event: BusEvent) => {
    if (event.type === killOn) {
      process.stdout.write(`killing myself on ${event.type} of ${String(event.data.id)}\n`);
      process.kill(process.pid, 'SIGKILL');
    }
    emit(event);
  };
}
const firstKey = await app.ensureFirstKey();
await app.start();
if (firstKey) process.stdout.write(`\nfirst key:\n\n  ${firstKey}\n\n`);
