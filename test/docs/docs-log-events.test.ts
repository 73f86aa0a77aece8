import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WEBHOOK_EVENT_TYPES } from '../../src/core/webhooks/webhook-endpoints-service.js';
import { codeSpans, ROOT, tablesOf } from './helpers/markdown.js';

// operations.md's table of log events is what an operator greps and alerts on, held to the code
// both ways: every `event` it names is one the code logs (an event renamed or dropped in the code
// fails here), and every event the code logs has its row (a new one undocumented fails here).
// An event is an `event: '...'` in src, bar the webhook event types (a contact write is tagged
// with the webhook event it emits). A family, `event: \`delivery.${outcome}\``, is documented by
// its members, each by the full name an operator greps: the test asks for at least one, as only
// the code knows the values.

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

const code = sources(join(ROOT, 'src')).map((f) => readFileSync(f, 'utf8'));
const webhookEvents = new Set<string>(WEBHOOK_EVENT_TYPES);
const logged = new Set(code.flatMap((text) => [...text.matchAll(/\bevent: '([a-zA-Z0-9_.]+)'/g)].map((m) => m[1]!)).filter((name) => !webhookEvents.has(name)));
/** `event: \`delivery.${outcome}\``: a family whose last part is a variable. */
const families = code.flatMap((text) => [...text.matchAll(/\bevent: `([a-zA-Z0-9_.]+\.)\$\{/g)].map((m) => m[1]!));
const isMember = (name: string, prefix: string) => name.startsWith(prefix) && /^[a-z_]+$/.test(name.slice(prefix.length));
const isLogged = (name: string) => logged.has(name) || families.some((prefix) => isMember(name, prefix));

const table = tablesOf('docs/operations.md').find((x) => x.headings.includes('Logs') && x.header[0] === '`event`');
const documented = (table?.rows ?? []).flatMap((r) => codeSpans(r.cells[0]!).map((name) => ({ name, at: r.at })));

test('every event in the Logs table of operations.md is logged by the code', (t) => {
  if (!table) return t.fail('no event table under ## Logs');
  t.true(documented.length > 10);
  const unknown = documented.filter((d) => !isLogged(d.name)).map((d) => `${d.at}: ${d.name}`);
  t.deepEqual(unknown, [], 'documented events the code never logs');
  t.true(documented.some((d) => d.name === 'serve.ready'), 'the start line that says where everything is');
});

test('every event the code logs has its row in the Logs table of operations.md', (t) => {
  if (!table) return t.fail('no event table under ## Logs');
  const names = new Set(documented.map((d) => d.name));
  t.true(logged.size > 10 && families.length > 0, 'the code\'s events are found');
  t.deepEqual([...logged].filter((name) => !names.has(name)).sort(), [], 'events the code logs that the table does not name');
  const undocumentedFamilies = [...new Set(families)].filter((prefix) => ![...names].some((name) => isMember(name, prefix)));
  t.deepEqual(undocumentedFamilies.map((prefix) => `${prefix}*`), [], 'event families the table names no member of');
});
