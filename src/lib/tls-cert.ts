// Self-signed certificate generation for STARTTLS (RFC 3207).
//
// Used by the product (inbound SMTP makes one on first start when the operator
// configured none) and by the test suite (the SMTP sink that stands in for the
// recipients' MX). Not a substitute for a CA-issued certificate: opportunistic
// TLS between MTAs (RFC 7435) tolerates it, a verifying client only accepts it
// when it pins this exact certificate as its `ca`.
import { isIP } from 'node:net';

export interface SelfSignedCertOptions {
  /** DNS names for subjectAltName; the first one is also the subject CN. */
  hostnames: string[];
  /** IP addresses for subjectAltName (default ['127.0.0.1']). */
  ips?: string[];
  /** Validity period in days (default 3650). */
  days?: number;
}

export interface PemKeyPair {
  /** PKCS#8 private key, PEM. */
  key: string;
  /** X.509 certificate, PEM. */
  cert: string;
}

const DEFAULT_VALIDITY_DAYS = 3650;
const RSA_KEY_SIZE_BITS = 2048;
const MS_PER_DAY = 24 * 60 * 60 * 1000;
// Backdate notBefore so a peer whose clock runs slightly behind ours does not
// reject a certificate minted a moment ago as "not yet valid".
const CLOCK_SKEW_ALLOWANCE_MS = 5 * 60 * 1000;

export async function generateSelfSignedCert(opts: SelfSignedCertOptions): Promise<PemKeyPair> {
  const hostnames = opts.hostnames.map((h) => h.trim()).filter((h) => h.length > 0);
  if (hostnames.length === 0) throw new Error('generateSelfSignedCert: at least one hostname is required');
  const ips = opts.ips ?? ['127.0.0.1'];
  for (const ip of ips) {
    if (isIP(ip) === 0) throw new Error(`generateSelfSignedCert: not an IP address: ${ip}`);
  }
  const days = opts.days ?? DEFAULT_VALIDITY_DAYS;
  if (!Number.isFinite(days) || days <= 0) throw new Error(`generateSelfSignedCert: invalid days: ${days}`);

  const notBeforeDate = new Date(Date.now() - CLOCK_SKEW_ALLOWANCE_MS);
  const notAfterDate = new Date(notBeforeDate.getTime() + CLOCK_SKEW_ALLOWANCE_MS + days * MS_PER_DAY);

  // selfsigned >= 5 is async-only (WebCrypto underneath).
  // selfsigned (with its crypto libraries) is only needed the rare times a certificate is made.
  const { generate } = await import('selfsigned');
  const pems = await generate([{ name: 'commonName', value: hostnames[0] }], {
    keyType: 'rsa',
    keySize: RSA_KEY_SIZE_BITS,
    algorithm: 'sha256', // the library still defaults to SHA-1, which current OpenSSL refuses
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        // RFC 6125 / RFC 2818: clients match the name against subjectAltName and
        // ignore the CN once any DNS SAN is present, so every name goes here.
        name: 'subjectAltName',
        altNames: [
          ...hostnames.map((value) => ({ type: 2 as const, value })),
          ...ips.map((ip) => ({ type: 7 as const, ip })),
        ],
      },
    ],
  });
  return { key: pems.private, cert: pems.cert };
}
