import { simpleParser } from 'mailparser';
import type { BusEvent } from '../../../src/core/events.js';
import { sendBody, type MailWorld } from '../../helpers/mail-world.js';
import { headersOf } from './smtp-client.js';

/** An email sent through the API and delivered to the world's sink, with what the sink got. */
export interface DeliveredEmail {
  id: string;
  raw: Buffer;
  messageId: string;
  returnPath: string;
  subject: string;
}

export async function waitForStatus(w: MailWorld, id: string, status: string) {
  for (let i = 0; i < 100; i++) {
    await w.settle();
    const res = await w.t0.request('GET', `/v1/emails/${id}`);
    if (res.body.latestStatus === status) return res.body;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`email ${id} never reached ${status}`);
}

/** Sends through the API and waits until every recipient is DELIVERED to the sink. */
export async function sendAndDeliver(w: MailWorld, extra: Record<string, unknown> = {}): Promise<DeliveredEmail> {
  const before = w.sink.messages.length;
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, extra) });
  if (res.status !== 200) throw new Error(`send failed: ${JSON.stringify(res.body)}`);
  const id = res.body.emailId as string;
  await waitForStatus(w, id, 'DELIVERED');
  const msg = w.sink.messages.slice(before).find((m) => m.raw.toString().includes(id));
  if (!msg) throw new Error('the sink did not get the message');
  const parsed = await simpleParser(msg.raw);
  return { id, raw: msg.raw, messageId: parsed.messageId!, returnPath: msg.mailFrom, subject: parsed.subject ?? '' };
}

/** The original as a receiving MTA would quote it: its headers only, optionally without some. */
export function quotedHeaders(raw: Buffer, drop: string[] = []): string {
  const lower = drop.map((d) => d.toLowerCase());
  const lines = headersOf(raw).split(/\r\n(?![ \t])/);
  return lines.filter((l) => !lower.includes(l.slice(0, l.indexOf(':')).toLowerCase())).join('\r\n');
}

/** Collects bus events of some types (what webhooks would be sent). */
export function collectEvents(w: MailWorld, types: string[]): BusEvent[] {
  const seen: BusEvent[] = [];
  w.t0.app.services.events.on('*', (e) => {
    if (types.includes(e.type)) seen.push(e);
  });
  return seen;
}
