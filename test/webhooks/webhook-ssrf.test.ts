import test from 'ava';
import { blockedAddressReason } from '../../src/core/webhooks/url-policy.js';
import { ipv6Bytes } from '../../src/lib/ip-ranges.js';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';

// The default install: webhooks.allowPrivate is false. Nothing here may ever reach an address
// outside loopback: "public" names resolve to 198.51.100.0/24 (TEST-NET-2), and no event is
// sent to them before they are rebound to loopback.

let t0: TestApp;
let receiver: WebhookReceiver;

test.before(async () => {
  t0 = await startTestApp();
  receiver = await startWebhookReceiver();
  t0.zone.set('internal.example.com', 'A', ['10.1.2.3']);
  t0.zone.set('mixed.example.com', 'A', ['198.51.100.7', '127.0.0.1']);
  t0.zone.set('v6.example.com', 'AAAA', ['::1']);
  t0.zone.set('alias.example.com', 'CNAME', ['metadata.example.com']);
  t0.zone.set('metadata.example.com', 'A', ['169.254.169.254']);
  t0.zone.set('public.example.com', 'A', ['198.51.100.7']);
  t0.zone.set('rebind.example.com', 'A', ['198.51.100.8']);
});
test.after.always(async () => {
  await t0?.close();
  await receiver?.close();
});

test.serial('private, loopback and link-local targets are refused, by literal and by what a name resolves to', async (t) => {
  const refused: [string, RegExp][] = [
    [receiver.url, /127\.0\.0\.1 is a loopback address/],
    ['http://10.0.0.5/hook', /a private address/],
    ['http://172.16.4.4/hook', /a private address/],
    ['http://192.168.1.1/hook', /a private address/],
    ['http://169.254.169.254/latest/meta-data/', /a link-local address/],
    ['http://0.0.0.0:8080/', /"this network"/],
    ['http://2130706433/', /127\.0\.0\.1 is a loopback address/], // decimal form of 127.0.0.1
    ['http://0x7f.1/', /loopback/],
    ['http://[::1]:8080/', /::1 is a loopback address/],
    ['http://[fe80::1]/', /link-local/],
    ['http://[fd12:3456::1]/', /unique local/],
    ['http://[::ffff:127.0.0.1]/', /loopback/],
    ['http://[::ffff:a9fe:a9fe]/', /link-local/],
    ['http://localhost:3000/', /loopback/],
    ['http://api.localhost/', /loopback/],
    ['https://internal.example.com/hook', /10\.1\.2\.3 is a private address \(internal\.example\.com resolves to 10\.1\.2\.3\)/],
    ['https://mixed.example.com/hook', /127\.0\.0\.1 is a loopback address/],
    ['https://v6.example.com/hook', /::1 is a loopback address/],
    ['https://alias.example.com/hook', /169\.254\.169\.254 is a link-local address/],
  ];
  for (const [url, message] of refused) {
    const res = await t0.request('POST', '/v1/webhooks', { body: { url, eventTypes: ['email.bounced'] } });
    t.is(res.status, 400, url);
    t.is(res.body.error.code, 'BAD_REQUEST');
    t.regex(res.body.error.message, /^url: /, url);
    t.regex(res.body.error.message, message, url);
  }
  const list = await t0.request('GET', '/v1/webhooks');
  t.is(list.body.total, 0, 'nothing was stored');
});

test.serial('a public target is accepted; changing it to a private one is refused and leaves it as it was', async (t) => {
  const made = await t0.request('POST', '/v1/webhooks', { body: { url: 'https://public.example.com/hook', eventTypes: ['email.complained'] } });
  t.is(made.status, 200);
  const patch = await t0.request('PATCH', `/v1/webhooks/${made.body.id}`, { body: { url: 'http://169.254.169.254/' } });
  t.is(patch.status, 400);
  t.regex(patch.body.error.message, /^url: .*link-local/);
  const got = await t0.request('GET', `/v1/webhooks/${made.body.id}`);
  t.is(got.body.url, 'https://public.example.com/hook');
  await t0.request('DELETE', `/v1/webhooks/${made.body.id}`);
});

test.serial('the address is checked again before each delivery: a name rebound to loopback gets nothing', async (t) => {
  const url = `http://rebind.example.com:${receiver.port}/hook`;
  const made = await t0.request('POST', '/v1/webhooks', { body: { url, eventTypes: ['webhook.test'] } });
  t.is(made.status, 200);
  // DNS rebinding: the name passed the check, then points at the server's own network.
  t0.zone.set('rebind.example.com', 'A', ['127.0.0.1']);
  const sent = await t0.request('POST', `/v1/webhooks/${made.body.id}/test`);
  t.is(sent.status, 200);
  await t0.app.webhookDispatcher.whenIdle();
  const attempts = (await t0.request('GET', `/v1/webhooks/${made.body.id}/attempts`)).body.attempts;
  t.is(attempts.length, 1);
  t.is(attempts[0].status, 'FAILED');
  t.is(attempts[0].response, null);
  t.regex(attempts[0].error, /^refused: 127\.0\.0\.1 is a loopback address \(rebind\.example\.com resolves to 127\.0\.0\.1\)/);
  t.truthy(attempts[0].nextAttemptAt, 'retried later like any failure');
  t.is(receiver.calls.length, 0, 'no request reached the loopback receiver');
});

test.serial('address classification', (t) => {
  const blocked = ['127.0.0.1', '127.255.255.254', '10.0.0.1', '172.31.255.255', '192.168.0.1', '169.254.1.1', '0.0.0.0', '100.64.0.1', '224.0.0.1', '255.255.255.255', '::', '::1', 'fc00::1', 'fdff::1', 'fe80::abcd', 'febf::1', 'ff02::1', '::ffff:10.0.0.1', '::ffff:7f00:1', '64:ff9b::c0a8:101', '::127.0.0.1'];
  for (const ip of blocked) t.truthy(blockedAddressReason(ip), ip);
  const allowed = ['8.8.8.8', '172.32.0.1', '172.15.255.255', '192.169.0.1', '169.255.0.1', '100.128.0.1', '198.51.100.7', '2001:4860:4860::8888', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', 'fec0::1'.replace('fec0', '2a00')];
  for (const ip of allowed) t.is(blockedAddressReason(ip), null, ip);
  t.deepEqual(ipv6Bytes('::ffff:1.2.3.4'), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 1, 2, 3, 4]);
  t.deepEqual(ipv6Bytes('1:2:3:4:5:6:7:8')?.length, 16);
  t.is(ipv6Bytes('1::2::3'), null);
  t.is(ipv6Bytes('12345::'), null);
});
