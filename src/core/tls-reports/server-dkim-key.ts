import { createPublicKey, generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';
import type { SettingsRepository } from '../../store/repositories/settings-repository.js';

/**
 * The DKIM key of mail Posthorn sends as itself, from an address on `hostname` (TLS reports,
 * RFC 8460 §5.3: "MUST be DKIM-signed"). Customer domains have their own keys; this one belongs
 * to the server. It is made on first use, kept in the store (settings), and published by the
 * operator at <selector>._domainkey.<hostname> (`posthorn server-dns` prints the record).
 */

const SETTING = 'server_dkim_private_key';
const KEY_BITS = 2048;
const generateKeyPairAsync = promisify(generateKeyPair);

export interface ServerDkimKey {
  /** d= : the server's host name. */
  domain: string;
  selector: string;
  privateKey: string;
  /** Base64 SubjectPublicKeyInfo: the p= of the DNS record. */
  publicKey: string;
  /** The TXT record to publish: name and value. */
  record: { name: string; value: string };
}

export function createServerDkimKeySource(deps: { settings: SettingsRepository; hostname: string; selector: string }): () => Promise<ServerDkimKey> {
  let loading: Promise<ServerDkimKey> | undefined;
  async function load(): Promise<ServerDkimKey> {
    let pem = await deps.settings.get(SETTING);
    if (!pem) {
      const { privateKey } = await generateKeyPairAsync('rsa', {
        modulusLength: KEY_BITS,
        publicKeyEncoding: { type: 'spki', format: 'der' },
        privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      });
      // Two starters at once keep whichever was stored first.
      pem = await deps.settings.getOrInsert(SETTING, privateKey as unknown as string);
    }
    const publicKey = createPublicKey(pem).export({ type: 'spki', format: 'der' }).toString('base64');
    const domain = deps.hostname.toLowerCase();
    return {
      domain,
      selector: deps.selector,
      privateKey: pem,
      publicKey,
      record: { name: `${deps.selector}._domainkey.${domain}`, value: `v=DKIM1; k=rsa; p=${publicKey}` },
    };
  }
  return () => {
    loading ??= load().catch((err) => {
      loading = undefined;
      throw err;
    });
    return loading;
  };
}
