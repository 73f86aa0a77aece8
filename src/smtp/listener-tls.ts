import { X509Certificate } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../lib/logger.js';
import { generateSelfSignedCert, type PemKeyPair } from '../lib/tls-cert.js';

// Certificates for STARTTLS on the inbound and submission listeners (RFC 3207). An operator
// configures a real one; without it we make a self-signed pair once and keep it in
// <dataDir>/tls/, so restarts present the same certificate. Sending MTAs use opportunistic
// TLS (RFC 7435) and accept it; submission clients need to be told to trust it.

/** Regenerate a self-signed certificate this close to its expiry. */
const RENEW_BEFORE_MS = 30 * 24 * 60 * 60 * 1000;
const KEY_FILE = 'self-signed-key.pem';
const CERT_FILE = 'self-signed-cert.pem';

export interface ListenerTlsOptions {
  certFile: string;
  keyFile: string;
  dataDir: string;
  hostname: string;
  logger: Logger;
}

export async function loadListenerTls(options: ListenerTlsOptions): Promise<PemKeyPair> {
  if (options.certFile || options.keyFile) {
    const [cert, key] = await Promise.all([readFile(options.certFile, 'utf8'), readFile(options.keyFile, 'utf8')]);
    return { cert, key };
  }
  return selfSigned(options);
}

/**
 * One source for both listeners: listeners without their own files share a single
 * self-signed pair, generated (or read) once per process.
 */
export function createListenerTlsSource(options: Omit<ListenerTlsOptions, 'certFile' | 'keyFile'>) {
  let shared: Promise<PemKeyPair> | undefined;
  return (files: { certFile: string; keyFile: string }): Promise<PemKeyPair> => {
    if (files.certFile || files.keyFile) return loadListenerTls({ ...options, ...files });
    shared ??= selfSigned({ ...options, certFile: '', keyFile: '' });
    return shared;
  };
}

async function selfSigned(options: ListenerTlsOptions): Promise<PemKeyPair> {
  const dir = join(options.dataDir, 'tls');
  const keyPath = join(dir, KEY_FILE);
  const certPath = join(dir, CERT_FILE);
  try {
    const [key, cert] = await Promise.all([readFile(keyPath, 'utf8'), readFile(certPath, 'utf8')]);
    const x509 = new X509Certificate(cert);
    const fresh = Date.parse(x509.validTo) - Date.now() > RENEW_BEFORE_MS;
    // A changed hostname needs a certificate that names it (RFC 6125 matching on SAN).
    if (fresh && x509.checkHost(options.hostname) !== undefined) return { key, cert };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') options.logger.warn({ err, dir }, 'stored self-signed certificate unusable; generating a new one');
  }
  const pair = await generateSelfSignedCert({ hostnames: [options.hostname] });
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // Write then rename, so a crash never leaves a half-written key behind.
  await writeFile(`${keyPath}.tmp`, pair.key, { mode: 0o600 });
  await writeFile(`${certPath}.tmp`, pair.cert, { mode: 0o644 });
  await rename(`${keyPath}.tmp`, keyPath);
  await rename(`${certPath}.tmp`, certPath);
  options.logger.info({ cert: certPath, hostname: options.hostname }, 'generated a self-signed certificate for SMTP STARTTLS; configure inbound/submission certFile and keyFile for a CA-issued one');
  return pair;
}
