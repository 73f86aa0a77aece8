// DKIM signing core (RFC 6376, rsa-sha256, relaxed/relaxed) and the worker_threads entry
// that runs it off the main event loop. dkim-signer.ts owns the pool; with `workers: 0` it
// calls signMessage() below in-thread, so both paths share one implementation.
//
// Why not mailauth's dkimSign(): (1) it cannot oversign. Its signer puts into h= exactly
// the header instances present, so h= never names From one time more than there are From
// fields, and a second From could be prepended without breaking the signature
// (RFC 6376 8.15). (2) it re-parses the PEM key on every call (about 1 ms for RSA-2048,
// more than the RSA operation itself) and refuses a KeyObject. (3) without signTime, it
// renders t= twice from Date.now() (once into the hashed copy of the header, once into the
// emitted one), so a signature made across a second boundary fails verification.
// So the signature is assembled here from mailauth's own building blocks (header parsing,
// relaxed header canonicalization, tag formatting and folding), and only the choice of h=,
// the RSA operation with a cached key and the body hash (dkim-body-hash.ts: mailauth's, but
// faster for the usual CRLF text) are ours. A test checks that, without oversigning, the
// result is byte-identical to mailauth's dkimSign().
import { createPrivateKey, sign as rsaSign, type KeyObject } from 'node:crypto';
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import { relaxedBodyHash } from './dkim-body-hash.js';
import type { DkimKey, SignRequest, SignResponse } from './dkim-types.js';
import { composeMessage } from './mime-builder.js';
import { lowerThreadPriority } from '../../lib/thread-priority.js';

// ---- mailauth internals (CommonJS, no published types for these paths) ---------------
// Pinned by package.json (~4.13); the byte-identity test catches a drift in these modules.

interface ParsedHeaderLine {
  /** lowercased field name */
  key: string;
  casedKey: string;
  /** the whole field, folded as in the message, without the trailing CRLF */
  line: Buffer;
}
interface SigningHeaderLines {
  /** the h= value: field names joined with ": " */
  keys: string;
  headers: ParsedHeaderLine[];
}
interface DkimHeaderOpts {
  [tag: string]: string | number | undefined;
}

const requireCjs = createRequire(import.meta.url);
interface MailauthParts {
  parseHeaders(buf: Buffer): { parsed: ParsedHeaderLine[] };
  formatSignatureHeaderLine(type: 'DKIM', values: DkimHeaderOpts, folded: boolean): string;
  generateCanonicalizedHeader(
    type: 'DKIM',
    signingHeaderLines: SigningHeaderLines,
    options: {
      signingDomain: string;
      selector: string;
      algorithm: string;
      canonicalization: string;
      bodyHash: string;
      signTime: Date;
    },
  ): { canonicalizedHeader: Buffer; dkimHeaderOpts: DkimHeaderOpts };
}
let mailauthParts: MailauthParts | undefined;
/**
 * Loaded at the first signature, not with this module: they bring in ~150 ms of modules
 * (joi among them), which every process that loads the app (each CLI command) would
 * otherwise pay without signing anything.
 */
function mailauth(): MailauthParts {
  if (!mailauthParts) {
    const tools = requireCjs('mailauth/lib/tools.js') as Pick<MailauthParts, 'parseHeaders' | 'formatSignatureHeaderLine'>;
    const header = requireCjs('mailauth/lib/dkim/header/index.js') as Pick<MailauthParts, 'generateCanonicalizedHeader'>;
    mailauthParts = {
      parseHeaders: tools.parseHeaders,
      formatSignatureHeaderLine: tools.formatSignatureHeaderLine,
      generateCanonicalizedHeader: header.generateCanonicalizedHeader,
    };
  }
  return mailauthParts;
}

// ---- policy ----------------------------------------------------------------------------

const ALGORITHM = 'rsa-sha256';
/** relaxed survives the header re-folding and whitespace changes relays make (RFC 6376 3.4). */
const CANONICALIZATION = 'relaxed/relaxed';

/**
 * Fields put into h= (lowercase), every instance present. The ones that carry what the
 * reader sees or what one-click unsubscribe relies on (RFC 8058 4 requires
 * List-Unsubscribe and List-Unsubscribe-Post to be signed), and a TLS report's own fields.
 */
export const SIGNED_HEADER_FIELDS: readonly string[] = [
  'from',
  'to',
  'cc',
  'subject',
  'date',
  'message-id',
  'reply-to',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'in-reply-to',
  'references',
  'list-unsubscribe',
  'list-unsubscribe-post',
  // TLS reports (RFC 8460 5.3): which domain the report is about and who sent it.
  'tls-report-domain',
  'tls-report-submitter',
];

/**
 * Fields named in h= one time more than they occur. A verifier treats the extra name as
 * a null field (RFC 6376 5.4.2), so adding one more such field later breaks the
 * signature: a second From can not be prepended to a validly signed message
 * (RFC 6376 8.15).
 */
export const OVERSIGNED_HEADER_FIELDS: readonly string[] = ['from'];

/** RFC 8301 3.2: verifiers must reject RSA keys shorter than 1024 bits. */
const MIN_RSA_KEY_BITS = 1024;
/** Parsed keys kept per thread; one per sending domain in practice. */
const MAX_CACHED_KEYS = 256;

// d= and s= are written into the header as tag values; anything that could end the tag
// (";"), start a new one or fold the line must never get there (RFC 6376 3.2).
const UNSAFE_TAG_VALUE = /[\s;=\x00-\x1f\x7f]/;

// ---- private key cache -----------------------------------------------------------------

/** Least-recently-used cache of parsed private keys, keyed by their PEM text. */
export class PrivateKeyCache {
  private readonly keys = new Map<string, KeyObject>();

  constructor(private readonly maxEntries = MAX_CACHED_KEYS) {}

  get(key: DkimKey): KeyObject {
    const cached = this.keys.get(key.privateKey);
    if (cached) {
      // refresh recency: a Map iterates in insertion order
      this.keys.delete(key.privateKey);
      this.keys.set(key.privateKey, cached);
      return cached;
    }
    const parsed = parsePrivateKey(key);
    this.keys.set(key.privateKey, parsed);
    if (this.keys.size > this.maxEntries) {
      const oldest = this.keys.keys().next().value as string;
      this.keys.delete(oldest);
    }
    return parsed;
  }
}

function keyName(key: DkimKey): string {
  return `${key.selector}._domainkey.${key.domain}`;
}

function parsePrivateKey(key: DkimKey): KeyObject {
  if (typeof key.privateKey !== 'string' || !key.privateKey.trim()) {
    throw new Error(`Invalid DKIM private key for ${keyName(key)}: empty`);
  }
  let parsed: KeyObject;
  try {
    // PKCS#8 ("BEGIN PRIVATE KEY") and PKCS#1 ("BEGIN RSA PRIVATE KEY") PEM both parse here
    parsed = createPrivateKey({ key: key.privateKey, format: 'pem' });
  } catch (err) {
    throw new Error(`Invalid DKIM private key for ${keyName(key)}: ${(err as Error).message}`);
  }
  if (parsed.asymmetricKeyType !== 'rsa') {
    throw new Error(`Invalid DKIM private key for ${keyName(key)}: ${parsed.asymmetricKeyType} key, rsa-sha256 needs an RSA key`);
  }
  const bits = parsed.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < MIN_RSA_KEY_BITS) {
    throw new Error(`Invalid DKIM private key for ${keyName(key)}: ${bits}-bit RSA, at least ${MIN_RSA_KEY_BITS} bits required (RFC 8301 3.2)`);
  }
  return parsed;
}

function assertTagValue(name: 'domain' | 'selector', value: unknown): void {
  if (typeof value !== 'string' || !value || UNSAFE_TAG_VALUE.test(value) || value.startsWith('.') || value.endsWith('.')) {
    throw new Error(`Invalid DKIM ${name}: ${JSON.stringify(value)}`);
  }
}

// ---- message handling ------------------------------------------------------------------

const LF = 0x0a;
const CR = 0x0d;

/**
 * SMTP carries CRLF only (RFC 5321 2.3.8) and the body hash is computed over CRLF lines,
 * so a bare LF is turned into CRLF here: the returned message is exactly what was hashed.
 * Messages from composeMessage() are already CRLF, they take the copy-free path.
 */
function toCrlf(message: Buffer): Buffer {
  let bareLf = 0;
  for (let i = message.indexOf(LF); i !== -1; i = message.indexOf(LF, i + 1)) {
    if (i === 0 || message[i - 1] !== CR) bareLf++;
  }
  if (bareLf === 0) return message;
  const out = Buffer.allocUnsafe(message.length + bareLf);
  let o = 0;
  for (let i = 0; i < message.length; i++) {
    const c = message[i]!;
    if (c === LF && (i === 0 || message[i - 1] !== CR)) out[o++] = CR;
    out[o++] = c;
  }
  return out;
}

/** Index just past the CRLF CRLF that ends the header block, or -1 for a header-only message. */
function bodyStart(message: Buffer): number {
  if (message.length >= 2 && message[0] === CR && message[1] === LF) return 2; // empty header block
  const end = message.indexOf('\r\n\r\n');
  return end === -1 ? -1 : end + 4;
}

/**
 * Builds h= and the matching field list. Instances are taken bottom-up, the order in which
 * a verifier pairs repeated names with fields (RFC 6376 5.4.2); the oversigned names go
 * last so they pair with the missing field "above" the topmost real one.
 */
function selectSignedHeaders(parsed: ParsedHeaderLine[], oversign: boolean): SigningHeaderLines {
  const wanted = new Set(SIGNED_HEADER_FIELDS);
  const headers: ParsedHeaderLine[] = [];
  for (let i = parsed.length - 1; i >= 0; i--) {
    const header = parsed[i]!;
    if (header.key && wanted.has(header.key)) headers.push(header);
  }
  const names = headers.map((h) => h.casedKey);
  if (oversign) {
    for (const field of OVERSIGNED_HEADER_FIELDS) {
      const present = headers.find((h) => h.key === field);
      names.push(present ? present.casedKey : field);
    }
  }
  return { keys: names.join(': '), headers };
}

export interface SignMessageOptions {
  /** t= (RFC 6376 3.5); now by default. */
  signTime?: Date;
  /** Name OVERSIGNED_HEADER_FIELDS once more in h=; true by default (false only for the mailauth parity test). */
  oversign?: boolean;
}

export interface SignedParts {
  /** "DKIM-Signature: ...", folded, without the trailing CRLF. */
  signatureHeader: string;
  /** The message as hashed: the input, or a CRLF-normalized copy of it. */
  message: Buffer;
}

/** Computes the DKIM-Signature header for a message. Throws an Error with a readable message on bad input. */
export function signMessage(input: Buffer, key: DkimKey, keys: PrivateKeyCache, options: SignMessageOptions = {}): SignedParts {
  if (!key || typeof key !== 'object') throw new Error('DKIM key is missing');
  assertTagValue('domain', key.domain);
  assertTagValue('selector', key.selector);
  const privateKey = keys.get(key);

  const message = toCrlf(input);
  const start = bodyStart(message);
  const headerBlock = start === -1 ? message : message.subarray(0, start);
  const body = start === -1 ? Buffer.alloc(0) : message.subarray(start);

  const { parseHeaders, generateCanonicalizedHeader, formatSignatureHeaderLine } = mailauth();
  const { parsed } = parseHeaders(headerBlock);
  // RFC 6376 5.4: "The From header field MUST be signed"
  if (!parsed.some((h) => h.key === 'from')) {
    throw new Error(`Cannot DKIM-sign for ${keyName(key)}: the message has no From header (RFC 6376 5.4)`);
  }

  const bodyHash = relaxedBodyHash(body);

  const { canonicalizedHeader, dkimHeaderOpts } = generateCanonicalizedHeader('DKIM', selectSignedHeaders(parsed, options.oversign ?? true), {
    signingDomain: key.domain,
    selector: key.selector,
    algorithm: ALGORITHM,
    canonicalization: CANONICALIZATION,
    bodyHash,
    // always explicit: t= must be the same in the hashed and the emitted header (see top)
    signTime: options.signTime ?? new Date(),
  });
  dkimHeaderOpts.b = rsaSign('sha256', canonicalizedHeader, privateKey).toString('base64');
  const signatureHeader = formatSignatureHeaderLine('DKIM', dkimHeaderOpts, true);
  if (!/^DKIM-Signature: .*\bb=[A-Za-z0-9+/]/s.test(signatureHeader)) {
    throw new Error(`DKIM signing for ${keyName(key)} produced no signature`);
  }
  return { signatureHeader, message };
}

// ---- worker protocol -------------------------------------------------------------------

/** workerData marker: the module only listens on parentPort when started by the pool. */
export const WORKER_ROLE = 'posthorn-dkim-sign-worker';

function serve(port: NonNullable<typeof parentPort>): void {
  // Composing and signing is throughput work: the event loop (API, SMTP sessions) goes first.
  lowerThreadPriority();
  const keys = new PrivateKeyCache();
  port.on('message', (request: SignRequest) => {
    void handle(request);
  });
  async function handle(request: SignRequest): Promise<void> {
    let response: SignResponse;
    const transfer: ArrayBuffer[] = [];
    try {
      const raw = request.compose ? await composeMessage(request.compose) : Buffer.from(request.message);
      const { signatureHeader, message } = signMessage(raw, request.key, keys);
      // allocUnsafeSlow: an ArrayBuffer of its own (never the shared pool), so it can be
      // transferred back without a copy
      const headerBytes = Buffer.byteLength(signatureHeader, 'latin1') + 2;
      const signed = Buffer.allocUnsafeSlow(headerBytes + message.length);
      signed.write(signatureHeader + '\r\n', 0, 'latin1');
      message.copy(signed, headerBytes);
      response = { id: request.id, ok: true, signed: signed.buffer as ArrayBuffer };
      transfer.push(response.signed);
    } catch (err) {
      response = { id: request.id, ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    port.postMessage(response, transfer);
  }
}

if (parentPort && (workerData as { role?: unknown } | null)?.role === WORKER_ROLE) {
  serve(parentPort);
}
