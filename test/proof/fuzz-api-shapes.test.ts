import test from 'ava';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { answerProblem, probe, watchProcess } from './helpers/http-probe.js';

// JSON bodies of extreme shape, within the size limit, to each route kind that takes a large
// JSON body: a million-element array where an array is expected and where a string or an object
// is, 100,000 levels of nesting, an object of 200,000 keys. The process has one main thread,
// so a shape that costs super-linear work there (a schema walk, an error message naming every
// element) stalls every tenant: each must be refused (400/413) within the suite's timeout,
// never a 500 or a hang, and the next request must be answered. fuzz-api.test.ts draws random
// hostile input; this one is the fixed worst case of size.

/** The default limit, so every shape below is a size the server accepts. */
const BODY_LIMIT = 40 * 1024 * 1024;
const ELEMENTS = 1_000_000;
const LEVELS = 100_000;
const KEYS = 200_000;

/** The shapes, as JSON text (built as text: stringifying them would itself recurse). */
const SHAPES: Record<string, string> = {
  'array of 1,000,000 numbers': `[${'0,'.repeat(ELEMENTS - 1)}0]`,
  'array of 1,000,000 strings': `[${'"a",'.repeat(ELEMENTS - 1)}"a"]`,
  'array of 1,000,000 objects': `[${'{},'.repeat(ELEMENTS - 1)}{}]`,
  'arrays nested 100,000 deep': '['.repeat(LEVELS) + ']'.repeat(LEVELS),
  'objects nested 100,000 deep': '{"a":'.repeat(LEVELS) + '0' + '}'.repeat(LEVELS),
  'object of 200,000 keys': `{${Array.from({ length: KEYS }, (_, i) => `"k${i}":"v"`).join(',')}}`,
  'object of 200,000 address-like keys': `{${Array.from({ length: KEYS }, (_, i) => `"x${i}@example.net":${i}`).join(',')}}`,
};
const SLOT = '"__SHAPE__"';

let t0: TestApp;
let port: number;
let watch: ReturnType<typeof watchProcess>;
/** Per route kind: the path, and bodies with the slot where each shape goes. */
let targets: { kind: string; path: string; perRow?: boolean; slots: Record<string, unknown> }[];

test.before(async () => {
  watch = watchProcess();
  t0 = await startTestApp({ overrides: { sandbox: true, http: { bodyLimitBytes: BODY_LIMIT } } });
  port = t0.app.listeners.http!.port;
  await addVerifiedDomain(t0, 'sender.dev');
  const from = 'Shapes <hello@sender.dev>';
  const book = (await t0.request('POST', '/v1/contactBooks', { body: { name: 'Shapes', variables: ['company'] } })).body;
  const S = '__SHAPE__';
  const send = { from, to: ['alice@example.net'], subject: 'Hello', html: '<p>Hi</p>' };
  const doc = JSON.stringify({ type: 'doc', content: [{ type: 'paragraph', content: [{ type: 'text', text: 'x' }] }] });
  const campaign = { name: 'C', from, subject: 'News', contactBookId: book.id, html: '<p>Hi {{unsubscribeUrl}}</p>' };
  const filters = { match: 'all', conditions: [{ field: 'email', op: 'contains', value: 'example' }] };
  targets = [
    {
      kind: 'a send',
      path: '/v1/emails',
      slots: {
        body: S,
        'to (array or string)': { ...send, to: S },
        'subject (string)': { ...send, subject: S },
        'headers (object)': { ...send, headers: S },
        'attachments (array)': { ...send, attachments: S },
        'tags (array)': { ...send, tags: S },
        'variables (object)': { ...send, variables: S },
      },
    },
    {
      kind: 'a batch',
      path: '/v1/emails/batch',
      slots: { 'body (array)': S, "an element's to": [{ ...send, to: S }], "an element's subject": [{ ...send, subject: S }] },
    },
    {
      kind: 'contacts bulk add',
      path: `/v1/contactBooks/${book.id}/contacts/bulk`,
      perRow: true,
      slots: {
        'body (array)': S,
        "an element's email (string)": [{ email: S }],
        "an element's properties (object)": [{ email: 'p@example.net', properties: S }],
      },
    },
    {
      kind: 'a campaign',
      path: '/v1/campaigns',
      slots: { body: S, 'name (string)': { ...campaign, name: S }, 'html (string)': { ...campaign, html: S }, 'replyTo (array)': { ...campaign, replyTo: S } },
    },
    {
      kind: 'a template',
      path: '/v1/templates',
      slots: { body: S, 'name (string)': { name: S, subject: 's', content: doc }, 'content (document)': { name: 'T', subject: 's', content: S } },
    },
    {
      kind: 'a segment filter',
      path: '/v1/segments',
      slots: {
        body: S,
        'filters (object)': { name: 'Seg', contactBookId: book.id, filters: S },
        'filters.conditions (array)': { name: 'Seg', contactBookId: book.id, filters: { match: 'all', conditions: S } },
        "a condition's value": { name: 'Seg', contactBookId: book.id, filters: { match: 'all', conditions: [{ field: 'email', op: 'in', value: S }] } },
        'name (string)': { name: S, contactBookId: book.id, filters },
      },
    },
  ];
});
test.after.always(async () => {
  watch?.stop();
  await t0?.close();
});

const KINDS = ['a send', 'a batch', 'contacts bulk add', 'a campaign', 'a template', 'a segment filter'];
// One test per kind and shape, so the suite's timeout bounds a handful of requests.
for (const kind of KINDS) {
  for (const [name, shape] of Object.entries(SHAPES)) {
    test.serial(`${kind}: ${name} in every slot is refused, and the server answers the next request`, async (t) => {
      const target = targets.find((x) => x.kind === kind)!;
      for (const [slot, template] of Object.entries(target.slots)) {
        const [before, after] = JSON.stringify(template).split(SLOT) as [string, string];
        const body = Buffer.from(before + shape + after);
        t.true(body.length <= BODY_LIMIT, `${name} fits the limit`);
        const describe = `${name} as ${slot} of ${kind}`;
        const res = await probe(port, { method: 'POST', path: target.path, headers: { authorization: `Bearer ${t0.key}`, 'content-type': 'application/json' }, body });
        t.is(answerProblem(res, true), null, describe);
        if (target.perRow && slot.startsWith('an element') && res.status === 200) {
          // A bulk add answers each row (spec: contacts bulk): the one row is rejected, nothing added.
          t.like(res.json, { created: 0, updated: 0, errors: [{ index: 0 }] }, describe);
        } else {
          t.true(res.status === 400 || res.status === 413, `${describe}: ${res.status} ${res.text.slice(0, 200)}`);
        }
        t.true(res.text.length < 64 * 1024, `${describe}: an answer of ${res.text.length} bytes`);
        const next = await t0.request('GET', '/v1/domains');
        t.is(next.status, 200, `the request after ${describe}`);
      }
      t.is(watch.prototypePolluted(), null);
      t.deepEqual(watch.problems, []);
    });
  }
}
