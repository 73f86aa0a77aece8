import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import type { DnsZone } from './dns-zone.js';

// A remote domain's DKIM signature on a message it sends (a TLS reporter, a partner): the public
// key published in the test zone at <selector>._domainkey.<domain>, the signature prepended.

const SELECTOR = 'reports2026';
let key: { publicKey: KeyObject; privateKey: KeyObject } | undefined;

export interface SignAsOptions {
  selector?: string;
  /** Sign only this many body octets (the l= tag, RFC 6376 3.5). */
  bodyLength?: number;
}

export async function dkimSignAs(zone: DnsZone, domain: string, message: Buffer, opts: SignAsOptions = {}): Promise<Buffer> {
  key ??= generateKeyPairSync('rsa', { modulusLength: 2048 });
  const selector = opts.selector ?? SELECTOR;
  zone.set(`${selector}._domainkey.${domain}`, 'TXT', [`v=DKIM1; k=rsa; p=${key.publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`]);
  const signed = await dkimSign(message, {
    canonicalization: 'relaxed/relaxed',
    // Fixed: without it mailauth renders t= from the clock twice (the hashed header and the
    // emitted one), and a second that ticks between them breaks the signature (~1 in 700).
    signTime: new Date(),
    signatureData: [{ signingDomain: domain, selector, privateKey: key.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), maxBodyLength: opts.bodyLength }],
  } as Parameters<typeof dkimSign>[1]);
  if (signed.errors.length) throw new Error(JSON.stringify(signed.errors));
  return Buffer.concat([Buffer.from(signed.signatures), message]);
}
