import type { Logger } from '../lib/logger.js';

// Typed internal events. Core operations emit them as the state change happens; the webhook
// outbox, analytics and campaign counters subscribe.
//
// One path for everything that must not be lost: an emitter calls inTransaction(events) INSIDE
// the write transaction that makes the change those events report (a group-commit write fn or a
// Kysely transaction: the store is one connection, so synchronous statements land in whatever
// transaction is open), then emit() with the same objects after the commit. The transactional
// subscribers (onInTransaction: webhook outbox rows, analytics rollups) write there, so their
// rows commit or roll back with the change: a process killed right after the commit still has
// them, and a write the store refuses (a full disk) refuses the change and its events together.
// An event with no state change of its own (a webhook test event) is written in a small
// transaction of its own; it is stored, or the request fails with the store's error. No event
// is kept in memory to be written later.
//
// Handlers registered with on() run after the commit, for what a killed process may skip
// (waking the webhook dispatcher, which also sweeps the store for due work, and campaign
// counters, recounted at start); a failing one is logged and never breaks the emitter.

export type EmailEventType =
  | 'email.queued'
  | 'email.sent'
  | 'email.delivery_delayed'
  | 'email.delivered'
  | 'email.bounced'
  | 'email.rejected'
  | 'email.rendering_failure'
  | 'email.complained'
  | 'email.failed'
  | 'email.cancelled'
  | 'email.suppressed'
  | 'email.opened'
  | 'email.clicked'
  | 'email.received';

export type DomainEventType = 'domain.created' | 'domain.verified' | 'domain.updated' | 'domain.deleted';
export type ContactEventType = 'contact.created' | 'contact.updated' | 'contact.deleted';
export type EventType = EmailEventType | DomainEventType | ContactEventType | 'webhook.test';

export interface BusEvent {
  type: EventType;
  teamId: number;
  /** Set for email and domain events, so webhook endpoints can filter on domainIds. */
  domainId: number | null;
  occurredAt: string;
  data: Record<string, unknown>;
}

export type EventHandler = (event: BusEvent) => void | Promise<void>;

/**
 * Runs inside the emitter's write transaction with the events that transaction reports (one
 * attempt's SENT and DELIVERED come together, so a subscriber can write them as one row):
 * synchronous, touching the database only through synchronous statements, and pure (the write
 * may be rolled back and run again, with the same event objects). A throw fails the emitter's
 * write, so it must throw only for database errors that should refuse the state change too (a
 * full disk).
 */
export type TransactionalHandler = (events: readonly BusEvent[]) => void;

export class EventBus {
  private readonly handlers = new Map<EventType | '*', EventHandler[]>();
  /** After-commit handlers still running (campaign counters write to the store). */
  private readonly running = new Set<Promise<void>>();
  private transactional: TransactionalHandler[] = [];
  constructor(private readonly logger?: Logger) {}

  /** A subscriber run by inTransaction() for every batch of events, inside the emitter's transaction. */
  onInTransaction(handler: TransactionalHandler): () => void {
    this.transactional.push(handler);
    return () => {
      this.transactional = this.transactional.filter((h) => h !== handler);
    };
  }

  /**
   * Called by every emitter inside its write transaction, for the events it will emit() after
   * the commit (the same objects). Errors propagate: they fail the write.
   */
  inTransaction(events: readonly BusEvent[]): void {
    if (!events.length) return;
    for (const handler of this.transactional) handler(events);
  }

  on(type: EventType | '*', handler: EventHandler): () => void {
    const list = this.handlers.get(type) ?? [];
    list.push(handler);
    this.handlers.set(type, list);
    return () => {
      const current = this.handlers.get(type) ?? [];
      this.handlers.set(type, current.filter((h) => h !== handler));
    };
  }

  /** Resolves once every after-commit handler started so far, and any they started, has finished. */
  async settled(): Promise<void> {
    while (this.running.size) await Promise.allSettled([...this.running]);
  }

  emit(event: BusEvent): void {
    for (const handler of [...(this.handlers.get(event.type) ?? []), ...(this.handlers.get('*') ?? [])]) {
      try {
        const result = handler(event);
        if (result && typeof (result as Promise<void>).catch === 'function') {
          const done: Promise<void> = (result as Promise<void>)
            .catch((err) => this.logger?.error({ err, type: event.type }, 'event handler failed'))
            .finally(() => this.running.delete(done));
          this.running.add(done);
        }
      } catch (err) {
        this.logger?.error({ err, type: event.type }, 'event handler failed');
      }
    }
  }
}
