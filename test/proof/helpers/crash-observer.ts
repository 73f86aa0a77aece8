import { EventEmitter } from 'node:events';
import type { DnsZone } from '../../helpers/dns-zone.js';
import type { SinkMessage } from '../../helpers/smtp-sink.js';
import { verifySignature, type ReceivedCall } from '../../webhooks/webhook-receiver.js';

// What the outside world saw of a Posthorn process that is killed and restarted: every message
// the SMTP sink accepted and every webhook call the receiver got, indexed by email id and event
// id so duplicates (allowed: at least once) and losses (not allowed) can be counted.

/** Publishes the records a domain asks for (one RRset per name and type) into the zone. */
export function publishDomainRecords(zone: DnsZone, domain: { dnsRecords: { type: string; name: string; value: string; priority?: string | null }[] }): void {
  const sets = new Map<string, { name: string; type: string; values: unknown[] }>();
  for (const r of domain.dnsRecords) {
    const set = sets.get(`${r.name}|${r.type}`) ?? { name: r.name, type: r.type, values: [] };
    set.values.push(r.type === 'MX' ? { exchange: r.value, priority: Number(r.priority ?? 10) } : r.value);
    sets.set(`${r.name}|${r.type}`, set);
  }
  for (const s of sets.values()) zone.set(s.name, s.type as 'TXT', s.values as string[]);
}

const EMAIL_ID_HEADER = /^X-Posthorn-Email-ID:\s*(\S+)/im;

export class CrashObserver {
  /** Fires on every sink message and webhook call (and whenever the test calls tick()). */
  readonly progress = new EventEmitter();
  /** Sink deliveries per email id (X-Posthorn-Email-ID header). */
  readonly deliveries = new Map<string, number>();
  /** Email ids delivered to each recipient address. */
  readonly idsByRecipient = new Map<string, Set<string>>();
  sinkMessages = 0;
  /** Calls received per webhook event id. */
  readonly callsByEvent = new Map<string, number>();
  /** Distinct email.delivered event ids per email id. */
  readonly deliveredEvents = new Map<string, Set<string>>();
  webhookCalls = 0;
  badSignatures = 0;
  unreadable = 0;

  constructor(private readonly webhookSecret: () => string | undefined) {
    this.progress.setMaxListeners(100);
  }

  onSinkMessage(msg: SinkMessage): void {
    const head = msg.raw.subarray(0, Math.min(msg.raw.length, 16_384)).toString('latin1').split('\r\n\r\n')[0]!;
    const id = EMAIL_ID_HEADER.exec(head)?.[1];
    this.sinkMessages++;
    if (!id) {
      this.unreadable++;
    } else {
      this.deliveries.set(id, (this.deliveries.get(id) ?? 0) + 1);
      for (const rcpt of msg.rcptTo) {
        const set = this.idsByRecipient.get(rcpt.toLowerCase()) ?? new Set<string>();
        set.add(id);
        this.idsByRecipient.set(rcpt.toLowerCase(), set);
      }
    }
    this.tick();
  }

  onWebhookCall(call: ReceivedCall): void {
    this.webhookCalls++;
    const secret = this.webhookSecret();
    if (!secret || !verifySignature(secret, call)) this.badSignatures++;
    const ev = call.json as { id?: string; type?: string; data?: { id?: string } } | undefined;
    if (!ev?.id) {
      this.unreadable++;
    } else {
      this.callsByEvent.set(ev.id, (this.callsByEvent.get(ev.id) ?? 0) + 1);
      if (ev.type === 'email.delivered' && ev.data?.id) {
        const set = this.deliveredEvents.get(ev.data.id) ?? new Set<string>();
        set.add(ev.id);
        this.deliveredEvents.set(ev.data.id, set);
      }
    }
    this.tick();
  }

  tick(): void {
    this.progress.emit('tick');
  }

  /**
   * Resolves once cond() holds, checked on every progress event. The timeout is a safety net
   * for a hang (the error says what was missing), not a pacing device.
   */
  until(cond: () => boolean, what: () => string, timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (cond()) return resolve();
      const check = () => {
        if (!cond()) return;
        clearTimeout(timer);
        this.progress.off('tick', check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.progress.off('tick', check);
        reject(new Error(`timed out: ${what()}`));
      }, timeoutMs);
      this.progress.on('tick', check);
    });
  }

  /** Messages delivered more than once, counted beyond the first. */
  duplicateDeliveries(): number {
    let n = 0;
    for (const c of this.deliveries.values()) n += c - 1;
    return n;
  }

  /** Webhook calls that repeated an event already received (a call re-sent after the kill). */
  repeatedCalls(): number {
    let n = 0;
    for (const c of this.callsByEvent.values()) n += c - 1;
    return n;
  }

  /** Extra email.delivered events (another event id) for an email, from a re-delivery. */
  extraDeliveredEvents(): number {
    let n = 0;
    for (const s of this.deliveredEvents.values()) n += s.size - 1;
    return n;
  }
}
