import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain, publishRecords } from '../helpers/domain-fixtures.js';
import { receiveOne } from './helpers/smtp-client.js';

// A receiving domain that is an internationalised domain: RCPT TO written in Unicode
// (SMTPUTF8) or in A-labels, in any case, reaches the one domain; and a sending domain named in
// Unicode is kept, checked and signed under its A-label.

let t0: TestApp;
let port: number;

test.before(async () => {
  t0 = await startTestApp();
  port = t0.app.listeners.inbound!.port;
});
test.after.always(async () => {
  await t0?.close();
});

const queuedIds = (response: string) => (/queued as (.*)$/.exec(response)?.[1] ?? '').split(' ').filter((id) => id.startsWith('re_'));

test.serial('RCPT TO at an IDN receiving domain in Unicode or A-labels, any case, is stored for that domain', async (t) => {
  const inbox = await addVerifiedDomain(t0, 'xn--bcher-kva.dev');
  t.is((await t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } })).status, 200);
  for (const to of ['hilfe@bücher.dev', 'hilfe@xn--bcher-kva.dev', 'Hilfe@BÜCHER.dev', 'hilfe@XN--BCHER-KVA.DEV']) {
    const res = await receiveOne(port, to);
    t.true(res.ok, `${to}: ${res.response}`);
    const [id] = queuedIds(res.response);
    const got = await t0.request('GET', `/v1/receivedEmails/${id}`);
    t.is(got.body.domainId, inbox.id, to);
  }
  const other = await receiveOne(port, 'hilfe@bucher.dev');
  t.false(other.ok, 'bucher.dev without the umlaut is another domain');
});

test.serial('a sending domain named in Unicode is stored under its A-label, its records and DNS check name the A-label, and one name is one domain', async (t) => {
  const created = await t0.request('POST', '/v1/domains', { body: { name: 'Straße-Läden.de', region: 'local' } });
  t.is(created.status, 200, JSON.stringify(created.body));
  t.is(created.body.name, 'xn--strae-lden-83a7d.de');
  t.true(created.body.dnsRecords.every((r: any) => /^[\x21-\x7e]+$/.test(r.name) && r.name.endsWith('xn--strae-lden-83a7d.de')), JSON.stringify(created.body.dnsRecords));
  publishRecords(t0, created.body);
  const verify = await t0.request('PUT', `/v1/domains/${created.body.id}/verify`);
  t.is(verify.status, 200);
  t.is((await t0.request('GET', `/v1/domains/${created.body.id}`)).body.status, 'SUCCESS', 'the records were looked up under the A-label');
  const again = await t0.request('POST', '/v1/domains', { body: { name: 'xn--strae-lden-83a7d.de', region: 'local' } });
  t.is(again.status, 409, 'the A-label names the same domain');
  const bad = await t0.request('POST', '/v1/domains', { body: { name: 'bad\u0000.de', region: 'local' } });
  t.is(bad.status, 400);
});
