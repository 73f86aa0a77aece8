import type { ListenerState } from '../core/operators/admin-health.js';

// Where the listeners stand, for /admin/v1/health. Apart from smtp-listeners.ts, which loads the
// SMTP servers: an admin command builds the app without ever starting them.

export interface Listeners {
  http?: { host: string; port: number };
  /** Inbound SMTP (bounces, complaints, receiving domains) and authenticated submission. */
  inbound?: { host: string; port: number };
  submission?: { host: string; port: number };
}

/** Each listener's state for /admin/v1/health: listening (where), failed to start, or not started yet. */
export function listenerStatesOf(listeners: Listeners, failed: Set<string>): Record<string, ListenerState> {
  return Object.fromEntries(
    (['http', 'inbound', 'submission'] as const).map((name) => {
      const l = listeners[name];
      return [name, l ? { state: 'listening', host: l.host, port: l.port } : { state: failed.has(name) ? 'failed' : 'not started', host: null, port: null }];
    }),
  );
}
