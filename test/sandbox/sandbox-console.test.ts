import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { ConsoleClient, consoleUser } from '../console/helpers/console-client.js';

// The console of a server in sandbox mode tells the truth about it: a domain that has not
// verified sends (to the capture mailbox), so the console offers it in the test-send form and
// does not say its mail is refused. Without sandbox mode both stay as they were.

async function consoleOf(sandbox: boolean): Promise<{ t0: TestApp; c: ConsoleClient; domainId: number }> {
  const t0 = await startTestApp({ overrides: { sandbox } });
  const created = await t0.request('POST', '/v1/domains', { body: { name: 'not-yet.dev', region: 'local' } });
  if (created.status !== 200) throw new Error(JSON.stringify(created.body));
  await consoleUser(t0.app, 'op@not-yet.dev', t0.teamId);
  const c = new ConsoleClient(t0.baseUrl);
  await c.signIn('op@not-yet.dev');
  return { t0, c, domainId: created.body.id };
}

test('in sandbox mode an unverified domain is offered for a test send, which is accepted, and the overview does not say its mail is refused', async (t) => {
  const { t0, c } = await consoleOf(true);
  t.teardown(() => t0.close());
  const overview = (await c.get('/console')).text;
  t.regex(overview, /not-yet\.dev<\/a> is not verified/);
  t.notRegex(overview, /Mail from it is refused until/);
  t.regex(overview, /sandbox mode/i);
  const emails = (await c.get('/console/emails')).text;
  t.notRegex(emails, /first <a href="\/console\/domains">add and verify a domain/);
  t.regex(emails, /<option value="not-yet\.dev"/);
  t.regex(emails, /capture mailbox/);
  const sent = await c.post('/console/emails/send', { fromLocal: 'hello', fromDomain: 'not-yet.dev', to: 'you@example.org', subject: 's', text: 't' });
  t.is(sent.status, 303);
  t.regex(sent.location ?? '', /^\/console\/emails\/em_/);
});

test('without sandbox mode an unverified domain is not offered for a test send, and the overview says its mail is refused', async (t) => {
  const { t0, c } = await consoleOf(false);
  t.teardown(() => t0.close());
  const overview = (await c.get('/console')).text;
  t.regex(overview, /not-yet\.dev<\/a> is not verified.*Mail from it is refused until its DNS records are published\./s);
  t.notRegex(overview, /sandbox/i);
  const emails = (await c.get('/console/emails')).text;
  t.regex(emails, /first <a href="\/console\/domains">add and verify a domain/);
  t.notRegex(emails, /<option value="not-yet\.dev"/);
});
