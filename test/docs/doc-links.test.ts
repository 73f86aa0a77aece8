import test from 'ava';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

// The links between the docs: every relative link names a file of the repository (never a path
// outside it), and every #anchor a heading of its target, as GitHub renders them. Code comments
// and the docs cite sections by these anchors, so a renamed heading must not go unnoticed.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** The text of a doc without code blocks and code spans (a link written there is not a link). */
function prose(file: string): string {
  return readFileSync(join(ROOT, file), 'utf8')
    .replace(/^```[\s\S]*?^```/gm, '')
    .replace(/`[^`\n]*`/g, '');
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes, repeats numbered. */
function headingAnchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  const text = markdown.replace(/^```[\s\S]*?^```/gm, '');
  for (const m of text.matchAll(/^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$/gm)) {
    const slug = m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n ? `${slug}-${n}` : slug);
  }
  return anchors;
}

test('every link between the docs names a file of the repository and a heading that exists', (t) => {
  const anchorsOf = new Map<string, Set<string>>();
  const anchors = (file: string) => {
    if (!anchorsOf.has(file)) anchorsOf.set(file, headingAnchors(readFileSync(join(ROOT, file), 'utf8')));
    return anchorsOf.get(file)!;
  };
  const broken: string[] = [];
  let checked = 0;
  for (const doc of DOCS) {
    for (const m of prose(doc).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const link = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue; // https:, mailto:
      checked++;
      const [path, anchor] = link.split('#') as [string, string | undefined];
      const target = path ? normalize(join(dirname(doc), decodeURIComponent(path))) : doc;
      if (target.startsWith('..') || relative(ROOT, join(ROOT, target)).split(sep)[0] === '..') broken.push(`${doc}: ${link} points outside the repository`);
      else if (!existsSync(join(ROOT, target))) broken.push(`${doc}: ${link}: no file ${target}`);
      else if (anchor && target.endsWith('.md') && !anchors(target).has(anchor)) broken.push(`${doc}: ${link}: no heading #${anchor} in ${target}`);
    }
  }
  t.log(`${checked} links in ${DOCS.length} docs`);
  t.true(checked > 50);
  t.deepEqual(broken, []);
});

test('the anchors are GitHub\'s', (t) => {
  const anchors = headingAnchors('# Moving to PostgreSQL: `posthorn store copy`\n## TLS reporting (TLS-RPT)\n```\n# not a heading\n```\n## Logs\n## Logs\n');
  t.deepEqual([...anchors], ['moving-to-postgresql-posthorn-store-copy', 'tls-reporting-tls-rpt', 'logs', 'logs-1']);
});
