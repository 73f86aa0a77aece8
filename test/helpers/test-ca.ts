/**
 * A certificate authority of the test suite's own: leaf certificates it signs are trusted by an
 * app given `ca.pem` as outbound.caFile (besides the system store), so a test MX or HTTPS server
 * can present a certificate that is good, for the wrong name, expired, or signed by nobody we
 * trust.
 */
import { X509Certificate, createHash } from 'node:crypto';
import { generate } from 'selfsigned';

export interface TestCa {
  /** PEM of the CA certificate (the file an app trusts). */
  pem: string;
  key: string;
  /** A leaf certificate signed by this CA; cert includes the CA certificate after the leaf (a full chain). */
  issue(opts: LeafOptions): Promise<{ key: string; cert: string; leafPem: string }>;
}

export interface LeafOptions {
  hostnames: string[];
  ips?: string[];
  /** Validity, default from an hour ago for ten years; an expired one ends in the past. */
  notBefore?: Date;
  notAfter?: Date;
  /** false: the names only in the subject's CN (which RFC 8461 §4.2 does not accept), no SAN at all. */
  san?: boolean;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

function leafExtensions(hostnames: string[], ips: string[], san = true) {
  return [
    { name: 'basicConstraints' as const, cA: false, critical: true },
    { name: 'keyUsage' as const, digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage' as const, serverAuth: true },
    ...(san ? [{ name: 'subjectAltName' as const, altNames: [...hostnames.map((value) => ({ type: 2 as const, value })), ...ips.map((ip) => ({ type: 7 as const, ip }))] }] : []),
  ];
}

export async function createTestCa(name = 'Posthorn Test CA'): Promise<TestCa> {
  const now = Date.now();
  const ca = await generate([{ name: 'commonName', value: name }], {
    keyType: 'rsa',
    keySize: 2048,
    algorithm: 'sha256',
    notBeforeDate: new Date(now - DAY_MS),
    notAfterDate: new Date(now + 3650 * DAY_MS),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return {
    pem: ca.cert,
    key: ca.private,
    async issue(opts) {
      const leaf = await generate([{ name: 'commonName', value: opts.hostnames[0]! }], {
        keyType: 'rsa',
    keySize: 2048,
        algorithm: 'sha256',
        notBeforeDate: opts.notBefore ?? new Date(Date.now() - HOUR_MS),
        notAfterDate: opts.notAfter ?? new Date(Date.now() + 3650 * DAY_MS),
        extensions: leafExtensions(opts.hostnames, opts.ips ?? ['127.0.0.1'], opts.san),
        ca: { key: ca.private, cert: ca.cert },
      });
      return { key: leaf.private, cert: `${leaf.cert.trim()}\n${ca.cert.trim()}\n`, leafPem: leaf.cert };
    },
  };
}

/** A self-signed leaf nobody trusts. */
export async function selfSignedLeaf(hostnames: string[]): Promise<{ key: string; cert: string; leafPem: string }> {
  const pems = await generate([{ name: 'commonName', value: hostnames[0]! }], {
    keyType: 'rsa',
    keySize: 2048,
    algorithm: 'sha256',
    notBeforeDate: new Date(Date.now() - HOUR_MS),
    notAfterDate: new Date(Date.now() + 365 * DAY_MS),
    extensions: leafExtensions(hostnames, ['127.0.0.1']),
  });
  return { key: pems.private, cert: pems.cert, leafPem: pems.cert };
}

/** TLSA association data (RFC 6698): selector 0 = whole certificate, 1 = SubjectPublicKeyInfo; matching 0 = exact, 1 = SHA-256, 2 = SHA-512. */
export function tlsaData(pem: string, selector: 0 | 1, matchingType: 0 | 1 | 2): string {
  const cert = new X509Certificate(pem);
  const data = selector === 0 ? cert.raw : cert.publicKey.export({ type: 'spki', format: 'der' });
  if (matchingType === 0) return data.toString('hex');
  return createHash(matchingType === 1 ? 'sha256' : 'sha512').update(data).digest('hex');
}
