import test from 'ava';
import { startTestApp } from '../helpers/test-app.js';
import { addVerifiedDomain } from '../helpers/domain-fixtures.js';
import { startWebhookReceiver, verifySignature } from '../webhooks/webhook-receiver.js';
import { smtpSend } from './helpers/smtp-client.js';

// email.received reaches a customer's webhook endpoint like any other event, signed.

test('mail for a receiving domain is announced to webhooks as email.received', async (t) => {
  const receiver = await startWebhookReceiver();
  t.teardown(() => receiver.close());
  const t0 = await startTestApp({ overrides: { webhooks: { allowPrivate: true } } });
  t.teardown(() => t0.close());
  const inbox = await addVerifiedDomain(t0, 'inbox.dev');
  await t0.request('PATCH', `/v1/domains/${inbox.id}`, { body: { receiving: true } });
  const hook = await t0.request('POST', '/v1/webhooks', { body: { url: receiver.url, eventTypes: ['email.received'], domainIds: [inbox.id] } });
  t.is(hook.status, 200, JSON.stringify(hook.body));

  const res = await smtpSend({
    port: t0.app.listeners.inbound!.port,
    from: 'someone@remote.example',
    to: ['hello@inbox.dev'],
    raw: 'From: Someone <someone@remote.example>\r\nTo: hello@inbox.dev\r\nSubject: Ping\r\nMessage-ID: <ping-1@remote.example>\r\n\r\nping\r\n',
  });
  t.true(res.ok, res.response);
  const id = /queued as (re_\S+)/.exec(res.response)![1];

  const [call] = await receiver.waitFor(1);
  t.true(verifySignature(hook.body.secret, call!));
  t.is(call!.json.type, 'email.received');
  t.like(call!.json.data, {
    id,
    domainId: inbox.id,
    subject: 'Ping',
    from: 'Someone <someone@remote.example>',
    messageId: '<ping-1@remote.example>',
    envelope: { mailFrom: 'someone@remote.example', rcptTo: ['hello@inbox.dev'] },
  });
  t.is(call!.json.data.authResults.spf, 'none', 'remote.example publishes no SPF in the test zone');
});
