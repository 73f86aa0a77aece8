import test from 'ava';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import { tempDir } from '../helpers/temp-dir.js';

// The layer rules of .dependency-cruiser.cjs (run on src/ by `npm test`) do catch what they
// are for: a miniature tree with one back edge of each kind must fail with exactly those.

const rules = createRequire(import.meta.url)('../../../.dependency-cruiser.cjs') as { forbidden: unknown[] };

test('a back edge, an edge-to-store shortcut, a cycle and a misplaced package each fail the check', async (t) => {
  const root = tempDir(t, 'posthorn-layers-');
  const files: Record<string, string> = {
    'src/lib/clock.ts': 'export const now = () => 1;\n',
    'src/store/db.ts': "import { now } from '../lib/clock.js';\nexport const db = now;\n",
    'src/core/thing-service.ts': "import { db } from '../store/db.js';\nimport { route } from '../api/route.js';\nexport const thing = () => db() + route;\n",
    'src/api/route.ts': "import { db } from '../store/db.js';\nexport const route = 1 + db();\n",
    'src/smtp/a.ts': "import { b } from './b.js';\nexport const a = () => b;\n",
    'src/smtp/b.ts': "import { a } from './a.js';\nexport const b = () => a;\n",
    'src/core/uses-kysely.ts': "import { Kysely } from 'kysely';\nexport const k = Kysely;\n",
  };
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  symlinkSync(join(process.cwd(), 'node_modules'), join(root, 'node_modules'));
  const cwd = process.cwd();
  process.chdir(root);
  let result: ICruiseResult;
  try {
    result = (await cruise(['src'], { validate: true, ruleSet: { forbidden: rules.forbidden } as never, tsPreCompilationDeps: true, doNotFollow: { path: 'node_modules' }, baseDir: root }, { bustTheCache: true }))
      .output as ICruiseResult;
  } finally {
    process.chdir(cwd);
  }
  const found = result.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
  t.true(found.includes('core-below-edges: src/core/thing-service.ts -> src/api/route.ts'), found.join('\n'));
  t.true(found.includes('edges-through-core: src/api/route.ts -> src/store/db.ts'), found.join('\n'));
  t.true(found.some((f) => f.startsWith('no-cycles: src/smtp/')), found.join('\n'));
  t.true(found.some((f) => /^packages-in-their-layer: src\/core\/uses-kysely\.ts -> .*node_modules\/kysely\//.test(f)), found.join('\n'));
  t.false(found.some((f) => f.includes('src/store/db.ts -> src/lib')), 'allowed edges pass');
});
