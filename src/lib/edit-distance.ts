/** Edit distance with swapped neighbours as one edit ("prot" is one from "port"), for "did you mean". */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** The names among `candidates` close enough to `name` to be a typo of it (not `name` itself). */
export function typosOf(name: string, candidates: Iterable<string>): string[] {
  const max = Math.min(2, Math.max(1, Math.floor(name.length / 3)));
  return [...candidates].filter((c) => c !== name && editDistance(c.toLowerCase(), name.toLowerCase()) <= max);
}
