// Seeds and run counts of the proof fuzz suites. Deterministic by default (fixed seeds, run
// counts sized for the shared CI box); FUZZ_SEED and FUZZ_RUNS explore further:
//   FUZZ_SEED=123 FUZZ_RUNS=2000 npx ava dist/test/proof/fuzz-api.test.js
// FUZZ_SEED replaces the base seed (each property derives its own from it and its name), and
// FUZZ_RUNS replaces every property's run count.

import fc from 'fast-check';

const BASE_SEED = 0x5eed_2026;

function envInt(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`${name} must be an integer, got ${JSON.stringify(raw)}`);
  return n;
}

/** The base seed this run uses (logged by each suite, so a failure can be replayed). */
export function baseSeed(): number {
  return envInt('FUZZ_SEED') ?? BASE_SEED;
}

/** A property's own seed: the base seed mixed with its name (FNV-1a), a 31-bit integer. */
export function seedFor(name: string): number {
  let h = 0x811c9dc5 ^ baseSeed();
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h & 0x7fffffff;
}

/** The run count of a property: `fallback`, unless FUZZ_RUNS says otherwise. */
export function runsFor(fallback: number): number {
  return envInt('FUZZ_RUNS') ?? fallback;
}

/** fast-check parameters for a named property. */
export function fcParams(name: string, fallbackRuns: number) {
  return { seed: seedFor(name), numRuns: runsFor(fallbackRuns), endOnFailure: false } as const;
}

/**
 * Runs a named property, returning its failure report instead of throwing, so one run lists
 * every broken route. The seed and path replay the exact counterexample: fc.assert(property, { seed, path }).
 */
export async function checkProperty(name: string, property: fc.IAsyncProperty<any>, runs: number): Promise<string | null> {
  const details = await fc.check(property, fcParams(name, runs));
  if (!details.failed) return null;
  const error = (details.errorInstance as Error | undefined)?.message ?? String(details.errorInstance);
  return `${name}: seed ${details.seed}, path "${details.counterexamplePath}", ${details.numRuns} runs, shrunk ${details.numShrinks} times\n  ${error.slice(0, 3000)}`;
}
