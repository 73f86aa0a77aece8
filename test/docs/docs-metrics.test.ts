import test from 'ava';
import { ManualClock } from '../../src/lib/clock.js';
import { startMailWorld, type MailWorld } from '../helpers/mail-world.js';
import { codeSpans, DOCS, prose, tablesOf } from './helpers/markdown.js';

// operations.md's metrics table against a running server's /metrics after a small send: every
// metric it documents is emitted with the labels it names, and every family emitted is in it.

let w: MailWorld;
// Bounce notices on: their gauge exists only then.
test.before(async () => {
  w = await startMailWorld({ clock: new ManualClock(Date.UTC(2026, 10, 25, 12, 0, 0)), overrides: { submission: { bounceNotices: true } } });
});
test.after.always(async () => {
  await w?.close();
});

interface Family {
  type: string;
  /** Label names seen on its samples (`le` of a histogram's buckets left out). */
  labels: Set<string>;
  samples: number;
}

/** The families of a Prometheus text exposition, with their label names. */
function families(text: string): Map<string, Family> {
  const out = new Map<string, Family>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(m[1]!, { type: m[2]!, labels: new Set(), samples: 0 });
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s/.exec(line);
    if (!m) continue;
    const family = out.get(m[1]!) ?? out.get(m[1]!.replace(/_(bucket|sum|count)$/, ''));
    if (!family) continue;
    family.samples++;
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) if (l[1] !== 'le') family.labels.add(l[1]!);
  }
  return out;
}

/** The documented metrics: name (or `prefix_*`) and the label names in backticks in the Labels column. */
function documented(): { at: string; name: string; labels: string[] }[] {
  const table = tablesOf('docs/operations.md').find((t) => t.headings.at(-1) === 'Metrics' && t.header[0] === 'Metric');
  if (!table) throw new Error('docs/operations.md has no metrics table under "## Metrics"');
  return table.rows.flatMap((row) =>
    codeSpans(row.cells[0]!).map((name) => ({
      at: row.at,
      name,
      // `type` (hard, soft): the label's values follow its name in parentheses.
      labels: codeSpans(row.cells[1]!.replace(/\([^)]*\)/g, '')),
    })),
  );
}

test('every metric operations.md documents is emitted with its labels, and every family emitted is documented', async (t) => {
  const res = await w.t0.request('POST', '/v1/emails', { body: { from: `news@${w.domain.name}`, to: 'someone@example.net', subject: 'Hi', text: 'Hello' } });
  t.is(res.status, 200);
  await w.settle();
  const scraped = await fetch(`${w.t0.baseUrl}/metrics`);
  t.is(scraped.status, 200);
  const emitted = families(await scraped.text());
  const docs = documented();
  const matches = (doc: string, name: string) => (doc.endsWith('*') ? name.startsWith(doc.slice(0, -1)) : name === doc);

  const problems: string[] = [];
  const unlabelled: string[] = [];
  for (const d of docs) {
    const names = [...emitted.keys()].filter((n) => matches(d.name, n));
    if (!names.length) {
      problems.push(`${d.at}: ${d.name} is not emitted`);
      continue;
    }
    if (d.name.endsWith('*')) continue;
    const family = emitted.get(d.name)!;
    // A family with no sample yet (a labelled counter nothing has counted) shows no labels: its
    // declaration in the registry names them.
    if (family.samples === 0) unlabelled.push(d.name);
    const declared = (w.t0.app.metrics.registry.getSingleMetric(d.name) as unknown as { labelNames?: string[] } | undefined)?.labelNames;
    const seen = (family.samples === 0 ? [...(declared ?? [])] : [...family.labels]).sort();
    if (seen.join() !== [...d.labels].sort().join()) problems.push(`${d.at}: ${d.name} has the labels ${seen.join(', ') || '(none)'}, the doc says ${d.labels.join(', ') || '(none)'}`);
  }
  for (const name of emitted.keys()) if (!docs.some((d) => matches(d.name, name))) problems.push(`${name} (${emitted.get(name)!.type}) is emitted but not in operations.md's table`);
  t.log(`${docs.length} documented, ${emitted.size} emitted; labels read from the registry (no sample yet): ${unlabelled.join(', ') || 'none'}`);
  t.true(docs.length > 20);
  t.deepEqual(problems, []);
});

test('every posthorn_ metric the docs name elsewhere is one of the table', (t) => {
  const names = new Set(documented().map((d) => d.name));
  const problems: string[] = [];
  for (const file of DOCS) {
    for (const span of codeSpans(prose(file))) {
      for (const m of span.matchAll(/\bposthorn_[a-z_]*[a-z]\b/g)) if (!names.has(m[0])) problems.push(`${file}: ${m[0]} (in \`${span}\`) is no documented metric`);
    }
  }
  t.deepEqual(problems, []);
});
