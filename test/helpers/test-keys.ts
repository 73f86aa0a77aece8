import { createHash, X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSelfSignedCert, type PemKeyPair, type SelfSignedCertOptions } from '../../src/lib/tls-cert.js';
import { generateDkimKeyPair, type DkimKeyPair } from '../../src/core/domains/domain-service.js';

// RSA keys made once for the whole suite: the self-signed certificates of the test peers (SMTP
// sinks, a test app's STARTTLS listeners) and new domains' DKIM keys. Making one costs ~0.25 s of
// CPU (~0.8 s with the first import of the libraries behind a certificate), every test file is
// its own process, and most start an app, a sink and a domain or more. So each is made once per
// machine and kept in the temp directory, shared by every process. The tests of making them
// (listener.test.ts, domains' key tests) ask the app to make its own.

const CACHE_DIR = join(tmpdir(), 'posthorn-test-keys');
/** A kept certificate closer than this to its end is made again (the product renews at 30 days). */
const KEEP_MIN_MS = 60 * 24 * 60 * 60 * 1000;

/** DKIM keys handed out in turn: domains made in one test file get different keys up to this many. */
const DKIM_KEYS = 16;

const inProcess = new Map<string, Promise<unknown>>();

/**
 * generateSelfSignedCert's pair for these names, from the suite's cache when it holds a fresh
 * one. Callers that ask for the same names share one key; `variant` makes another (a peer that
 * must present a certificate the client does not trust, beside one it does).
 */
export function testCert(opts: SelfSignedCertOptions, variant = ''): Promise<PemKeyPair> {
  const id = hashOf({ hostnames: opts.hostnames, ips: opts.ips ?? null, days: opts.days ?? null, variant });
  return kept(id, () => generateSelfSignedCert(opts), (pair) => Date.parse(new X509Certificate(pair.cert).validTo) - Date.now() > KEEP_MIN_MS);
}

let nextDkimKey = 0;
/** A new domain's DKIM key (AppOptions.dkimKeyPair): the suite's kept keys, in turn. */
export async function testDkimKeyPair(): Promise<DkimKeyPair> {
  const n = nextDkimKey++ % DKIM_KEYS;
  const stored = await kept(`dkim-${n}`, async () => {
    const pair = await generateDkimKeyPair();
    return { publicKeyDer: pair.publicKeyDer.toString('base64'), privateKeyPem: pair.privateKeyPem };
  }, (k) => typeof k.privateKeyPem === 'string');
  return { publicKeyDer: Buffer.from(stored.publicKeyDer, 'base64'), privateKeyPem: stored.privateKeyPem };
}

function hashOf(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 24);
}

/** The value kept under `id`, made (and kept) when there is none or `usable` refuses it. Once per process. */
function kept<T>(id: string, make: () => Promise<T>, usable: (value: T) => boolean): Promise<T> {
  let pending = inProcess.get(id) as Promise<T> | undefined;
  if (!pending) {
    pending = load(id, make, usable);
    // A failed generation must not poison every later caller in the process.
    pending.catch(() => inProcess.delete(id));
    inProcess.set(id, pending);
  }
  return pending;
}

async function load<T>(id: string, make: () => Promise<T>, usable: (value: T) => boolean): Promise<T> {
  const file = join(CACHE_DIR, `${id}.json`);
  if (existsSync(file)) {
    try {
      const value = JSON.parse(readFileSync(file, 'utf8')) as T;
      if (usable(value)) return value;
    } catch {
      // unreadable: made again below
    }
  }
  const value = await make();
  try {
    mkdirSync(CACHE_DIR, { recursive: true, mode: 0o700 });
    // Written aside and renamed: processes that make the same one at once each leave a whole file.
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    writeFileSync(tmp, JSON.stringify(value), { mode: 0o600 });
    renameSync(tmp, file);
  } catch {
    // Keeping it only saves time (a temp directory another user owns, a full disk): this process still has it.
  }
  return value;
}

/**
 * Puts the listener certificate a Posthorn on `hostname` would make into a data dir that has
 * none yet (<dataDir>/tls, as smtp/listener-tls.ts keeps it), so a test app starts without making one.
 */
export async function seedListenerCert(dataDir: string, hostname: string): Promise<void> {
  const dir = join(dataDir, 'tls');
  if (existsSync(dir)) return;
  const pair = await testCert({ hostnames: [hostname] });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, 'self-signed-key.pem'), pair.key, { mode: 0o600 });
  writeFileSync(join(dir, 'self-signed-cert.pem'), pair.cert, { mode: 0o644 });
}
