import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { codeSpans, DOCS, prose, tablesOf } from './helpers/markdown.js';

// The routes the docs name (`METHOD /path` in text, Method | Path tables) against the server:
// an API route (/v1, /api/v1, /admin/v1) must be in the route table the router mounts and the
// OpenAPI documents are built from; any other path must be answered by the real server with
// something other than its "no route" 404. And every route of the two APIs is documented.

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp();
});
test.after.always(async () => {
  await t0?.close();
});

const METHOD = '(?:GET|POST|PUT|PATCH|DELETE|HEAD)';
const SPAN = new RegExp(`^(${METHOD}(?:\\s*[/,]\\s*${METHOD})*)\\s+(/\\S*)`);

/** A path with its parameters as `{}` (`{id}`, `:id`, `<token>`), /api/v1 as /v1, no query. */
const normal = (path: string) =>
  path
    .replace(/[?#].*$/, '')
    .replace(/^\/api\/v1\//, '/v1/')
    .replace(/\{[^}]+\}|:[A-Za-z]\w*|<[^>]+>/g, '{}');

/** Tables whose paths are relative: the prefix their section says they are under. */
const TABLE_PREFIXES: Record<string, string> = {
  'docs/operations.md#The operator API': '/admin/v1',
  'docs/api.md#Contacts': '/v1/contactBooks/{id}',
};

interface DocRoute {
  at: string;
  method: string;
  path: string;
}

function documentedRoutes(): { routes: DocRoute[]; problems: string[] } {
  const routes: DocRoute[] = [];
  const problems: string[] = [];
  for (const file of DOCS) {
    for (const span of codeSpans(prose(file))) {
      const m = SPAN.exec(span);
      if (!m) continue;
      for (const method of m[1]!.split(/\s*[/,]\s*/)) routes.push({ at: `${file}: \`${span}\``, method, path: m[2]! });
    }
    for (const table of tablesOf(file)) {
      if (table.header[0] !== 'Method' || table.header[1] !== 'Path') continue;
      const prefix = TABLE_PREFIXES[`${file}#${table.headings.at(-1)}`] ?? '';
      for (const row of table.rows) {
        const path = codeSpans(row.cells[1]!)[0];
        if (!path) {
          problems.push(`${row.at}: no path`);
          continue;
        }
        const full = prefix + path;
        if (!/^\/(v1|admin\/v1)\//.test(full)) problems.push(`${row.at}: ${path} is under no API (name its prefix in TABLE_PREFIXES)`);
        for (const method of row.cells[0]!.split(/\s*,\s*/)) {
          if (!new RegExp(`^${METHOD}$`).test(method)) problems.push(`${row.at}: "${method}" is not a method`);
          else routes.push({ at: row.at, method, path: full });
        }
      }
    }
  }
  return { routes, problems };
}

const realRoutes = () => [
  ...t0.app.routes.map((r) => `${r.method.toUpperCase()} ${normal(`/v1${r.path}`)}`),
  ...t0.app.adminRoutes.map((r) => `${r.method.toUpperCase()} ${normal(`/admin/v1${r.path}`)}`),
];

test('every route the docs name is served', async (t) => {
  const { routes, problems } = documentedRoutes();
  const real = new Set(realRoutes());
  for (const r of routes) {
    const key = `${r.method} ${normal(r.path)}`;
    if (/^\/(v1|api\/v1|admin\/v1)\//.test(r.path)) {
      if (!real.has(key)) problems.push(`${r.at}: ${r.method} ${r.path} is no route of the API`);
      continue;
    }
    // A page outside the APIs (tracking, unsubscribe, /health, /metrics): the router has it if
    // its answer is anything but the router's own miss.
    const res = await fetch(`${t0.baseUrl}${r.path.replace(/[?#].*$/, '').replace(/\{[^}]+\}|<[^>]+>/g, 'x')}`, { method: r.method, redirect: 'manual' });
    const body = await res.text();
    if (res.status === 404 && body.includes('no route for')) problems.push(`${r.at}: ${r.method} ${r.path}: the server has no such route`);
  }
  t.log(`${routes.length} documented routes`);
  t.true(routes.length > 100);
  t.deepEqual(problems, []);
});

test('every route of /v1 and /admin/v1 is documented', (t) => {
  const documented = new Set(documentedRoutes().routes.map((r) => `${r.method} ${normal(r.path)}`));
  const real = realRoutes();
  t.true(real.length > 80);
  t.deepEqual(
    real.filter((r) => !documented.has(r)),
    [],
  );
});

test('the OpenAPI documents have every route of the tables', async (t) => {
  // The documents the docs point readers to are built from the same tables: the same routes.
  const paths = async (url: string, prefix: string) => {
    const doc = (await (await fetch(`${t0.baseUrl}${url}`)).json()) as { paths: Record<string, Record<string, unknown>> };
    return Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).filter((m) => /^(get|post|put|patch|delete|head)$/.test(m)).map((m) => `${m.toUpperCase()} ${normal(prefix + p)}`));
  };
  const fromDocuments = [...(await paths('/v1/openapi.json', '')), ...(await paths('/admin/v1/openapi.json', ''))].sort();
  t.deepEqual(fromDocuments, realRoutes().sort());
});
