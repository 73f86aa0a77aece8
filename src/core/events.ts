import type { Logger } from '../lib/logger.js';

// Typed internal events. Core operations emit them as the state change happens; webhooks,
// analytics and campaign counters subscribe. Handlers run after the emitting call's
// transaction committed; a failing handler is logged and never breaks the emitter.

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

export class EventBus {
  private readonly handlers = new Map<EventType | '*', EventHandler[]>();
  constructor(private readonly logger?: Logger) {}

  on(type: EventType | '*', handler: EventHandler): () => void {
    const list = this.handlers.get(type) ?? [];
    list.push(handler);
    this.handlers.set(type, list);
    return () => {
      const current = this.handlers.get(type) ?? [];
      this.handlers.set(type, current.filter((h) => h !== handler));
    };
  }

  emit(event: BusEvent): void {
    for (const handler of [...(this.handlers.get(event.type) ?? []), ...(this.handlers.get('*') ?? [])]) {
      try {
        const result = handler(event);
        if (result && typeof (result as Promise<void>).catch === 'function') {
          (result as Promise<void>).catch((err) => this.logger?.error({ err, type: event.type }, 'event handler failed'));
        }
      } catch (err) {
        this.logger?.error({ err, type: event.type }, 'event handler failed');
      }
    }
  }
}
