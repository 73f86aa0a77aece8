import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { smtpSend } from './helpers/smtp-client.js';

// HTML-only mail for a receiving domain: its text is made from the HTML, but only HTML the
// converter can take in bounded time. Before, every message was converted whatever its size, on
// the event loop (a 25 MB HTML body from any server on port 25 stalled the whole process for
// minutes), and HTML the converter gave up on (deep nesting) lost every parsed field: subject,
// addresses, HTML and attachments were stored as null.

let t0: TestApp;
let port: number;

test.before(async () => {
  t0 = await startTestApp();
  port = t0.app.listeners.inbound!.port;
  const inbox = await addVerifiedDomain(t0, 'inbox.dev');
  const on = await t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } });
  if (on.status !== 200) throw new Error(JSON.stringify(on.body));
});
test.after.always(async () => {
  await t0?.close();
});

async function receive(subject: string, html: string): Promise<any> {
  const raw = `From: Sender <news@partner.com>\r\nTo: desk@inbox.dev\r\nSubject: ${subject}\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n${html}\r\n`;
  const res = await smtpSend({ port, from: 'news@partner.com', to: ['desk@inbox.dev'], raw });
  if (!res.ok) throw new Error(res.response);
  const id = /queued as (re_\S+)/.exec(res.response)![1];
  const got = await t0.request('GET', `/v1/receivedEmails/${id}`);
  if (got.status !== 200) throw new Error(JSON.stringify(got.body));
  return got.body;
}

test('an HTML-only message gets a text made from its HTML', async (t) => {
  const m = await receive('Plain news', '<h1>Hello</h1><p>Read <b>this</b>.</p>');
  t.is(m.subject, 'Plain news');
  t.regex(m.text, /HELLO|Hello/);
  t.regex(m.text, /Read this\./);
});

test('HTML too deeply nested for the converter keeps every other parsed field; only the text is null', async (t) => {
  const m = await receive('Deep', `${'<div>'.repeat(20000)}deep inside`);
  t.is(m.subject, 'Deep');
  t.is(m.from, 'Sender <news@partner.com>');
  t.deepEqual(m.to, ['desk@inbox.dev']);
  t.true(typeof m.html === 'string' && m.html.includes('deep inside'));
  t.is(m.text, null);
});

test('a large HTML-only message is stored without a text made from it', async (t) => {
  const m = await receive('Big', '<p>a</p>'.repeat(100_000));
  t.is(m.subject, 'Big');
  t.true(m.html.startsWith('<p>a</p>') && m.html.length >= 800_000);
  t.is(m.text, null);
});
