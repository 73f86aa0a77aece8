import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { codeSpans, ROOT, tablesOf } from './helpers/markdown.js';

// operations.md's table of log events is what an operator greps and alerts on: every `event` it
// names is one the code logs (an event renamed or dropped in the code fails here).

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

const code = sources(join(ROOT, 'src')).map((f) => readFileSync(f, 'utf8'));
const logged = new Set(code.flatMap((text) => [...text.matchAll(/\bevent: '([a-zA-Z0-9_.]+)'/g)].map((m) => m[1]!)));
/** `event: \`delivery.${outcome}\``: a family whose last part is a variable. */
const families = code.flatMap((text) => [...text.matchAll(/\bevent: `([a-zA-Z0-9_.]+\.)\$\{/g)].map((m) => m[1]!));
const isLogged = (name: string) => logged.has(name) || families.some((prefix) => name.startsWith(prefix) && /^[a-z_]+$/.test(name.slice(prefix.length)));

test('every event in the Logs table of operations.md is logged by the code', (t) => {
  const table = tablesOf('docs/operations.md').find((x) => x.headings.includes('Logs') && x.header[0] === '`event`');
  if (!table) return t.fail('no event table under ## Logs');
  const documented = table.rows.flatMap((r) => codeSpans(r.cells[0]!).map((name) => ({ name, at: r.at })));
  t.true(documented.length > 10);
  const unknown = documented.filter((d) => !isLogged(d.name)).map((d) => `${d.at}: ${d.name}`);
  t.deepEqual(unknown, [], 'documented events the code never logs');
  t.true(documented.some((d) => d.name === 'serve.ready'), 'the start line that says where everything is');
});
