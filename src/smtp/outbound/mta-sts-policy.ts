/**
 * MTA-STS (RFC 8461) as text: the `_mta-sts` TXT record (§3.1), the policy file (§3.2) and MX
 * matching (§4.1). Parsing is strict where the RFC says MUST and lenient where it says so
 * (unknown fields and extensions are ignored, LF or CRLF line ends, first occurrence of a
 * field wins); anything else makes the record or the policy invalid, which callers report as
 * such (RFC 8460 "sts-policy-invalid") instead of guessing.
 */

export type StsMode = 'enforce' | 'testing' | 'none';

export interface StsPolicy {
  mode: StsMode;
  /** mx patterns, lowercased without a trailing dot: "mx.example.com" or "*.example.com". */
  mx: string[];
  /** Seconds the policy may be cached (§3.2: at most 31557600). */
  maxAgeSeconds: number;
  /** The policy's lines as served (for the report's policy-string, RFC 8460 §4.4). */
  lines: string[];
}

export class StsPolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StsPolicyError';
  }
}

/** §3.2: "maximum value of 31557600" (one year). */
export const MAX_STS_MAX_AGE_SECONDS = 31_557_600;
const STS_ID = /^[A-Za-z0-9]{1,32}$/;
const EXT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/;
const EXT_VALUE = /^[\x21-\x3a\x3c\x3e-\x7e]+$/;
const MAX_AGE = /^\d{1,10}$/;
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/**
 * The policy id of a TXT RRset (each record as its character-strings), or null when the domain
 * has no usable MTA-STS record: records not starting with "v=STSv1;" are discarded, and unless
 * exactly one is left and it is valid there is no policy to discover (§3.1).
 */
export function parseStsTxt(records: string[][]): { id: string } | null {
  // §3.1: the strings of one record are concatenated without spaces.
  const candidates = records.map((chunks) => chunks.join('')).filter((r) => /^v=STSv1;/.test(r));
  if (candidates.length !== 1) return null;
  let id: string | undefined;
  const fields = candidates[0]!.split(';').map((f) => f.trim());
  if (fields.at(-1) === '') fields.pop();
  for (const [i, field] of fields.entries()) {
    const eq = field.indexOf('=');
    if (eq <= 0) return null;
    const name = field.slice(0, eq).trim();
    const value = field.slice(eq + 1).trim();
    if (i === 0) {
      if (name !== 'v' || value !== 'STSv1') return null;
    } else if (name === 'id') {
      if (!STS_ID.test(value)) return null;
      id ??= value;
    } else if (!EXT_NAME.test(name) || !EXT_VALUE.test(value)) {
      return null;
    }
  }
  return id ? { id } : null;
}

/** An mx pattern: a host name, optionally with one leading "*." (§3.2 sts-policy-mx-value). */
function parseMxPattern(raw: string): string {
  const value = raw.toLowerCase().replace(/\.$/, '');
  const host = value.startsWith('*.') ? value.slice(2) : value;
  const labels = host.split('.');
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l))) throw new StsPolicyError(`mx: ${JSON.stringify(raw.slice(0, 80))} is not a host name pattern`);
  return value;
}

/**
 * The value without the spaces and tabs around it. Not /[ \t]+$/: that scans from every space
 * to the run's end, and a remote policy line of 64 KB of spaces before a letter took ~30 s.
 */
function trimSpaceTab(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && (value[start] === ' ' || value[start] === '\t')) start++;
  while (end > start && (value[end - 1] === ' ' || value[end - 1] === '\t')) end--;
  return value.slice(start, end);
}

/** Parses the policy file body (§3.2). Throws StsPolicyError saying what is wrong. */
export function parseStsPolicy(body: string): StsPolicy {
  const lines = body.split(/\r?\n/);
  if (lines.at(-1) === '') lines.pop();
  const fields = new Map<string, string>();
  const mx: string[] = [];
  const kept: string[] = [];
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new StsPolicyError(`not a "key: value" line: ${JSON.stringify(line.slice(0, 80))}`);
    const name = line.slice(0, colon);
    const value = trimSpaceTab(line.slice(colon + 1));
    if (!EXT_NAME.test(name)) throw new StsPolicyError(`invalid field name ${JSON.stringify(name.slice(0, 40))}`);
    if (value === '') throw new StsPolicyError(`${name}: empty value`);
    kept.push(`${name}: ${value}`);
    if (name === 'mx') mx.push(parseMxPattern(value));
    else if (!fields.has(name)) fields.set(name, value); // §3.2: the first occurrence counts
  }
  if (fields.get('version') !== 'STSv1') throw new StsPolicyError('version: must be STSv1');
  const mode = fields.get('mode');
  if (mode !== 'enforce' && mode !== 'testing' && mode !== 'none') throw new StsPolicyError('mode: must be enforce, testing or none');
  const maxAge = fields.get('max_age');
  if (maxAge === undefined || !MAX_AGE.test(maxAge) || Number(maxAge) > MAX_STS_MAX_AGE_SECONDS) {
    throw new StsPolicyError(`max_age: must be a whole number of seconds up to ${MAX_STS_MAX_AGE_SECONDS}`);
  }
  if (mx.length === 0 && mode !== 'none') throw new StsPolicyError('mx: at least one is required');
  return { mode, mx, maxAgeSeconds: Number(maxAge), lines: kept };
}

/**
 * §4.1: an MX host matches a pattern equal to it, or a "*." pattern whose wildcard stands for
 * exactly its leftmost label ("*.example.com" matches "mx.example.com", not "example.com" nor
 * "a.b.example.com").
 */
export function mxMatchesPattern(host: string, pattern: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  if (!pattern.startsWith('*.')) return h === pattern;
  const dot = h.indexOf('.');
  return dot > 0 && h.slice(dot + 1) === pattern.slice(2);
}

export function mxAllowed(host: string, policy: Pick<StsPolicy, 'mx'>): boolean {
  return policy.mx.some((p) => mxMatchesPattern(host, p));
}
