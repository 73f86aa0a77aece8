// Types shared by the DKIM signer (dkim-signer.ts, the pool of workers) and its worker
// (dkim-sign-worker.ts): the key, and the messages between the two.
import type { ComposeInput } from './mime-builder.js';

export interface DkimKey {
  /** d= tag: the signing domain. */
  domain: string;
  /** s= tag: the key is published at <selector>._domainkey.<domain>. */
  selector: string;
  /** PKCS#8 or PKCS#1 PEM, RSA of at least 1024 bits (2048 recommended). */
  privateKey: string;
}

export interface SignRequest {
  id: number;
  /** The message bytes, transferred (exactly this buffer's size). */
  message: ArrayBuffer;
  /** Compose the message from this first (then `message` is empty). */
  compose?: ComposeInput;
  key: DkimKey;
}

export type SignResponse =
  | { id: number; ok: true; /** signature header + CRLF + message, transferred */ signed: ArrayBuffer }
  | { id: number; ok: false; error: string };
