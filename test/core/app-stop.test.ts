import test from 'ava';
import { startTestApp } from '../helpers/test-app.js';

// After-commit handlers (campaign counters, a bounce that unsubscribes a contact) write to the
// store after the event that set them off. A graceful stop must let them finish before it
// closes the store, or their writes fail and are logged as errors at every restart.

test('stop() lets the after-commit handlers still running finish before it closes the store', async (t) => {
  const t0 = await startTestApp();
  t.teardown(() => t0.close());
  const order: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const store = t0.app.store;
  const close = store.close.bind(store);
  // The gate opens at whichever comes first: the stop waiting for the handlers, or closing the store.
  store.close = async () => {
    order.push('store closed');
    release();
    await close();
  };
  const settled = t0.app.services.events.settled.bind(t0.app.services.events);
  t0.app.services.events.settled = async () => {
    release();
    await settled();
  };
  t0.app.services.events.on('contact.updated', async () => {
    await gate;
    const teams = await t0.app.services.teams.list();
    order.push(`handler read ${teams.length} team(s)`);
  });
  t0.app.services.events.emit({ type: 'contact.updated', teamId: t0.teamId, domainId: null, occurredAt: new Date().toISOString(), data: {} });
  await t0.stop();
  t.deepEqual(order, ['handler read 1 team(s)', 'store closed']);
});
