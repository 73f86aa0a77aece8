// Memoizes nodemailer's header name normalization ("content-type" -> "Content-Type").
//
// MimeNode normalizes a name on every setHeader(), getHeader(), addHeader() and
// encodeHeaderValue() call, some sixty times per composed message, each time through four
// regular expressions, one of them with a replacer function. Profiled, that was ~45 us of
// the ~250 us composing costs (about 3% of all the CPU a delivered message takes). The
// function depends on its argument alone, and a message uses the same dozen names, so its
// results are remembered. Installed once, when mime-builder.ts is loaded; the original
// stays the only place that decides what a name becomes.
import MimeNode from 'nodemailer/lib/mime-node';

/** Distinct names remembered; custom headers are caller-chosen, so the memo is bounded. */
export const MAX_REMEMBERED_HEADER_KEYS = 1000;

type Normalize = (this: unknown, key: unknown) => string;
interface Patchable {
  _normalizeHeaderKey: Normalize & { memoized?: true };
}

const proto = MimeNode.prototype as unknown as Patchable;

/** The unpatched function, captured before anything installs the memo (for tests that compare). */
export const originalNormalizeHeaderKey: Normalize = proto._normalizeHeaderKey;

export function installHeaderKeyMemo(): void {
  if (proto._normalizeHeaderKey.memoized) return;
  const original = proto._normalizeHeaderKey;
  if (typeof original !== 'function') return; // nodemailer changed: compose as it does
  const memo = new Map<string, string>();
  const memoized: Normalize & { memoized?: true } = function (this: unknown, key: unknown): string {
    if (typeof key !== 'string') return original.call(this, key);
    let normalized = memo.get(key);
    if (normalized === undefined) {
      normalized = original.call(this, key);
      if (memo.size < MAX_REMEMBERED_HEADER_KEYS) memo.set(key, normalized);
    }
    return normalized;
  };
  memoized.memoized = true;
  proto._normalizeHeaderKey = memoized;
}
