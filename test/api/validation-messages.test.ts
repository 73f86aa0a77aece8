import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';

// A request body the schema refuses is 400 with the spec's error body naming the field and what
// is wrong with it in plain words, on every endpoint alike (api/validation.ts): "region: is
// required", not the validator's own wording ("Invalid input: expected string, received undefined").

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp();
});
test.after.always(async () => {
  await t0?.close();
});

const cases: [string, string, unknown, string][] = [
  ['POST', '/v1/domains', { name: 'plain.example.com' }, 'region: is required'],
  ['POST', '/v1/domains', { name: 'plain.example.com', region: 5 }, 'region: must be a string'],
  ['POST', '/v1/domains', { name: 'plain.example.com', region: null }, 'region: must be a string, not null'],
  ['POST', '/v1/domains', { name: 'plain.example.com', region: '  ' }, 'region: must not be empty'],
  ['POST', '/v1/domains', { name: 'plain.example.com', region: 'x'.repeat(65) }, 'region: must be at most 64 characters'],
  ['POST', '/v1/domains', { region: 'eu' }, 'name: is required'],
  ['POST', '/v1/domains', { name: 'plain.example.com', region: 'eu', regoin: 'eu' }, 'body: unknown field "regoin"'],
  // A required field reported missing beside an unknown one is most often that field misspelt.
  ['POST', '/v1/domains', { name: 'plain.example.com', regoin: 'eu' }, 'region: is required ("regoin" is not a field: did you mean "region"?)'],
  ['POST', '/v1/emails', { from: 'a@b.example', too: 'c@d.example', subject: 's', text: 't' }, 'to: is required ("too" is not a field: did you mean "to"?)'],
  ['POST', '/v1/emails/batch', [{ from: 'a@b.example', to: 'c@d.example', subject: 's', text: 't' }, { from: 'a@b.example', To: 'c@d.example', subject: 's', text: 't' }], '[1].to: is required ("To" is not a field: did you mean "to"?)'],
  ['POST', '/v1/domains', [], 'body: must be a JSON object'],
  ['PATCH', '/v1/domains/1', { tlsPolicy: 'STRICT' }, 'tlsPolicy: must be one of "OPPORTUNISTIC", "ENFORCED"'],
  ['PATCH', '/v1/domains/1', { clickTracking: 'yes' }, 'clickTracking: must be true or false'],
  ['POST', '/v1/apiKeys', {}, 'name: is required'],
  ['POST', '/v1/webhooks', { url: 5, eventTypes: ['email.sent'] }, 'url: must be a string'],
  ['POST', '/v1/contactBooks', { name: '' }, 'name: must not be empty'],
  ['POST', '/v1/campaigns', { name: 'x', from: 'a@b.example', subject: 's', contactBookId: 'cb_1', html: '<p>x</p>', batchSize: 0 }, 'batchSize: must be at least 1'],
  ['POST', '/v1/campaigns', { name: 'x', from: 'a@b.example', subject: 's', contactBookId: 'cb_1', html: '<p>x</p>', batchSize: 1.5 }, 'batchSize: must be an integer'],
  ['POST', '/v1/suppressions', {}, 'email: is required'],
  // A record's key (a property or header name) is named as the name, with the schema's own words.
  ['POST', '/v1/contactBooks/cb_none/contacts', { email: 'a@b.example', properties: { 'bad key!': 'x' } }, 'properties.bad key!: the name is not valid: property names are 1-64 characters of A-Z, a-z, 0-9, _ and -'],
  ['POST', '/v1/contactBooks', { name: 'b', properties: { ['k'.repeat(101)]: 'x' } }, `properties.${'k'.repeat(101)}: the name must be at most 100 characters`],
  ['POST', '/v1/emails', { from: 'a@b.example', to: 'c@d.example', subject: 's', text: 't', headers: { '': 'x' } }, 'headers.: the name must not be empty'],
];

for (const [method, path, body, message] of cases) {
  test(`${method} ${path} ${JSON.stringify(body).slice(0, 60)}: 400 "${message}"`, async (t) => {
    const res = await t0.request(method, path, { body });
    t.is(res.status, 400);
    t.deepEqual(res.body, { error: { code: 'BAD_REQUEST', message } });
  });
}

test('a message a schema words itself is kept', async (t) => {
  const res = await t0.request('POST', '/v1/emails', { body: { from: 'a@b.example', subject: 's', text: 't' } });
  t.is(res.status, 400);
  t.regex(res.body.error.message, /^to: /);
  t.notRegex(res.body.error.message, /Invalid input/);
});
