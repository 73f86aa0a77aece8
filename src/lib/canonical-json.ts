// Canonical JSON: object keys sorted recursively, undefined dropped. Two bodies that
// differ only in key order or whitespace serialise identically (spec, Idempotency rule 1).
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : sortKeys(v)));
  if (value !== null && typeof value === 'object') {
    // No prototype: a "__proto__" member (JSON.parse makes it an own property) is kept as a key
    // like any other instead of being swallowed by the setter, so two bodies that differ there
    // do not hash the same.
    const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const key of Object.keys(value as Record<string, unknown>).sort()) {
      const v = (value as Record<string, unknown>)[key];
      if (v !== undefined) out[key] = sortKeys(v);
    }
    return out;
  }
  return value;
}
