// Send bodies that try to inject header lines through every field that ends up in a header:
// subject, display names of from/to/cc/replyTo, quoted local parts, custom header names and
// values, attachment filenames, tags and template variables.
import fc from 'fast-check';
import { EDGE_CHARS } from './hostile.js';

/** Payloads that would add a header line (or a body) if anything wrote them raw. */
export const INJECTIONS = [
  '\r\nBcc: x@evil.com',
  '\nBcc: x@evil.com',
  '\rBcc: x@evil.com',
  '\r\n\r\n<html>injected body</html>',
  '\nX-Injected: 1',
  '\r\nX-Injected: 1',
  '\u2028X-Injected: 1',
  '\u2029Bcc: x@evil.com',
  '\u0085X-Injected: 1',
  '\u000bX-Injected: 1',
  '\u000cX-Injected: 1',
  '\u0000X-Injected: 1',
  '\r\n X-Folded: 1',
  '\r\n\tBcc: x@evil.com',
  '=?utf-8?Q?=0D=0ABcc:_x@evil.com?=',
  '=?utf-8?B?DQpCY2M6IHhAZXZpbC5jb20=?=',
  '=?x?q?=0A?= =?utf-8?q?X-Injected:_1?=',
  '"\r\nBcc: x@evil.com',
  '>\r\nBcc: x@evil.com',
  '", x@evil.com, "',
  '<x@evil.com>',
  'x@evil.com',
  'Evil <x@evil.com>, ',
  '\\',
  '"',
  '\\"',
  ';',
  ':',
  ',',
  '%0d%0aBcc: x@evil.com',
  '\r\nContent-Type: text/html',
  '\r\nContent-Transfer-Encoding: base64',
  '\r\n--boundary\r\nContent-Type: text/plain',
  '\r\n.\r\nMAIL FROM:<x@evil.com>',
] as const;

/** A string built from injection payloads, edge characters and random text. */
export const injected: fc.Arbitrary<string> = fc
  .array(fc.oneof({ arbitrary: fc.constantFrom(...INJECTIONS), weight: 4 }, { arbitrary: fc.string({ maxLength: 8 }), weight: 2 }, { arbitrary: fc.constantFrom(...EDGE_CHARS), weight: 1 }), { minLength: 1, maxLength: 2 })
  .map((parts) => parts.join(''));

export interface Slot {
  name: string | null;
  /** A hostile quoted local part, or null for the safe `r<N>`. */
  local: string | null;
  form: 'quoted-name' | 'bare-name' | 'addr-only' | 'trailing';
}

export interface InjectionCase {
  subject: string;
  fromName: string | null;
  fromForm: 'quoted' | 'bare';
  to: Slot[];
  cc: Slot[];
  bcc: Slot[];
  replyTo: Slot[];
  headers: [string, string][];
  filenames: string[];
  tags: string[];
  /** Sent through the template whose subject and body use {{name}}, with this value. */
  templateVar: string | null;
  /** Which fields carry the attack (for the report). */
  targets: string[];
}

const TARGETS = ['subject', 'fromName', 'toName', 'ccName', 'bccName', 'replyToName', 'toLocal', 'ccLocal', 'headerName', 'headerValue', 'filename', 'tag', 'templateVar'] as const;
type Target = (typeof TARGETS)[number];

const slotForm = fc.constantFrom<Slot['form']>('quoted-name', 'bare-name', 'addr-only', 'trailing');
/** Recipients nobody attacks, each in a form that is valid for its name. */
const saneSlot: fc.Arbitrary<Slot> = fc.oneof(
  fc.constant<Slot>({ name: 'Smith, Alice', local: null, form: 'quoted-name' }),
  fc.record({ name: fc.option(fc.constantFrom('Jane Doe', 'Zoë'), { freq: 3, nil: null }), local: fc.constant(null), form: fc.constantFrom<Slot['form']>('quoted-name', 'bare-name', 'addr-only') }),
);
const saneSlots = (max: number, min = 0) => fc.array(saneSlot, { minLength: min, maxLength: max });

/**
 * A sane send with one or two fields under attack, so that most cases get past validation and
 * the composed message is what gets checked (a case refused with 400 proves less).
 */
export function injectionCase(opts: { hostileLocals: boolean }): fc.Arbitrary<InjectionCase> {
  const targets = opts.hostileLocals ? TARGETS : TARGETS.filter((t) => !t.endsWith('Local'));
  return fc
    .record({
      base: fc.record({
        fromName: fc.option(fc.constant('Acme Billing'), { freq: 3, nil: null }),
        fromForm: fc.constantFrom<'quoted' | 'bare'>('quoted', 'bare'),
        to: saneSlots(3, 1),
        cc: saneSlots(2),
        bcc: saneSlots(2),
        replyTo: saneSlots(2),
        headers: fc.subarray<[string, string]>([['X-Campaign', 'spring'], ['X-Entity-Ref-ID', 'abc-123'], ['List-Id', '<news.sender.dev>']]),
        filenames: fc.subarray(['report.pdf', 'notes.txt']),
        tags: fc.subarray(['invoice', 'fuzz']),
      }),
      attacks: fc.uniqueArray(fc.tuple(fc.constantFrom<Target>(...targets), injected, slotForm), { minLength: 1, maxLength: 2, selector: ([t]) => t }),
    })
    .map(({ base, attacks }) => {
      const c: InjectionCase = { subject: 'Your invoice', templateVar: null, targets: attacks.map(([t]) => t), ...base, to: [...base.to], cc: [...base.cc], bcc: [...base.bcc], replyTo: [...base.replyTo], headers: [...base.headers], filenames: [...base.filenames], tags: [...base.tags] };
      for (const [target, payload, form] of attacks) {
        const slotIn = (list: Slot[], s: Partial<Slot>) => list.push({ name: null, local: null, form, ...s });
        switch (target) {
          case 'subject': c.subject = `Your invoice${payload}`; break;
          case 'fromName': c.fromName = `Acme${payload}`; break;
          case 'toName': slotIn(c.to, { name: `Jane${payload}` }); break;
          case 'ccName': slotIn(c.cc, { name: `Carol${payload}` }); break;
          case 'bccName': slotIn(c.bcc, { name: `Bob${payload}` }); break;
          case 'replyToName': slotIn(c.replyTo, { name: `Support${payload}` }); break;
          case 'toLocal': slotIn(c.to, { local: `a${payload}` }); break;
          case 'ccLocal': slotIn(c.cc, { local: `c${payload}` }); break;
          case 'headerName': c.headers.push([`X-A${payload}`, 'value']); break;
          case 'headerValue': c.headers.push(['X-Attack', `v${payload}`]); break;
          case 'filename': c.filenames.push(`report${payload}.pdf`); break;
          case 'tag': c.tags.push(`t${payload}`); break;
          case 'templateVar': c.templateVar = payload; break;
        }
      }
      return c;
    });
}

/** Slot i of a list: the address it means and the string the API gets. */
export function slotText(sl: Slot, index: string, domain: string): { address: string; text: string } {
  const address = sl.local === null ? `r${index}@${domain}` : `"${sl.local}"@${domain}`;
  const name = sl.name ?? '';
  switch (sl.form) {
    case 'quoted-name':
      return { address, text: `"${name}" <${address}>` };
    case 'bare-name':
      return { address, text: `${name} <${address}>` };
    case 'addr-only':
      return { address, text: address };
    case 'trailing':
      // junk after the address (glued on, it would only spell a different address)
      return { address, text: name ? `${address} ${name}` : address };
  }
}

/** The API send body of a case, and the addresses each list means. */
export function sendBodyOf(c: InjectionCase, fromDomain: string, extra: Record<string, unknown> = {}) {
  const lists = { to: c.to, cc: c.cc, bcc: c.bcc, replyTo: c.replyTo };
  const texts: Record<string, string[]> = {};
  const meant: Record<string, string[]> = {};
  for (const [key, slots] of Object.entries(lists)) {
    const domain = key === 'replyTo' ? fromDomain : key === 'cc' ? 'example.org' : 'example.net';
    const made = slots.map((sl, i) => slotText(sl, `${key}${i}`, domain));
    texts[key] = made.map((m) => m.text);
    meant[key] = made.map((m) => m.address);
  }
  const fromAddress = `hello@${fromDomain}`;
  const from = c.fromName === null ? fromAddress : c.fromForm === 'quoted' ? `"${c.fromName}" <${fromAddress}>` : `${c.fromName} <${fromAddress}>`;
  const body: Record<string, unknown> = {
    from,
    to: texts.to!.length === 1 ? texts.to![0] : texts.to,
    text: 'Plain body',
    html: '<p>HTML body</p>',
    ...extra,
  };
  if (c.templateVar === null) body.subject = c.subject;
  if (texts.cc!.length) body.cc = texts.cc;
  if (texts.bcc!.length) body.bcc = texts.bcc;
  if (texts.replyTo!.length) body.replyTo = texts.replyTo;
  if (c.headers.length) body.headers = Object.fromEntries(c.headers);
  if (c.filenames.length) body.attachments = c.filenames.map((filename) => ({ filename, content: Buffer.from('attachment').toString('base64') }));
  if (c.tags.length) body.tags = c.tags;
  return { body, meant };
}
