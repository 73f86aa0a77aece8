import test from 'ava';
import { startMailWorld, sendBody, type MailWorld } from '../helpers/mail-world.js';

// A recipient domain's DNS chooses the addresses Posthorn connects to. By default an MX on this
// host (loopback, 0.0.0.0) is refused, as Postfix refuses mail that "loops back to myself": a
// local MTA usually relays anything from loopback, so one published record would turn it into a
// relay reached through Posthorn. The tests' sink is on loopback, so this world turns the
// setting (outbound.allowLoopbackMx, on in every other mail world) back off.

let w: MailWorld;

test.before(async () => {
  w = await startMailWorld({ overrides: { outbound: { allowLoopbackMx: false } } });
});
test.after.always(async () => {
  await w?.close();
});

async function send(to: string): Promise<string> {
  const res = await w.t0.request('POST', '/v1/emails', { body: sendBody(w, { to }) });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.emailId;
}

test.serial('an MX on loopback: BOUNCED with the reason, never SENT, no connection made, and the address is suppressed', async (t) => {
  const connections = w.sink.connectionCount;
  // example.net's MX is the sink at 127.0.0.1, where a real server would be this host itself.
  const id = await send('someone@example.net');
  await w.settle();
  const email = (await w.t0.request('GET', `/v1/emails/${id}`)).body;
  t.deepEqual(email.emailEvents.map((e: any) => e.status), ['QUEUED', 'BOUNCED']);
  t.regex(email.emailEvents[1].data.response, /every MX host resolves only to loopback or unroutable addresses .*127\.0\.0\.1 is a loopback address.*outbound\.allowLoopbackMx/);
  t.is(email.emailEvents[1].data.bounce.type, 'Permanent');
  t.is(w.sink.connectionCount, connections, 'nothing connected to the loopback MX');
  const suppressed = await w.t0.request('GET', '/v1/suppressions?search=someone%40example.net');
  t.is(suppressed.status, 200);
  t.true(JSON.stringify(suppressed.body).includes('someone@example.net'));
});

test.serial('"MX 0 localhost"-style records (0.0.0.0, ::1) bounce too; a loopback MX beside a host that does not resolve yet is only delayed', async (t) => {
  w.zone.set('mx.zero.example', 'A', ['0.0.0.0']);
  w.zone.set('mx.zero.example', 'AAAA', ['::1']);
  w.zone.set('zero.example', 'MX', [{ exchange: 'mx.zero.example', priority: 0 }]);
  const zero = await send('x@zero.example');
  // A half-migrated zone may still get its real host's address: wait, do not bounce.
  w.zone.set('mx1.moving.example', 'A', ['127.0.0.1']);
  w.zone.set('mx2.moving.example', 'TXT', ['no address yet']);
  w.zone.set('moving.example', 'MX', [{ exchange: 'mx1.moving.example', priority: 10 }, { exchange: 'mx2.moving.example', priority: 20 }]);
  const moving = await send('y@moving.example');
  await w.settle();
  const statuses = async (id: string) => (await w.t0.request('GET', `/v1/emails/${id}`)).body.emailEvents.map((e: any) => e.status);
  t.deepEqual(await statuses(zero), ['QUEUED', 'BOUNCED']);
  t.deepEqual(await statuses(moving), ['QUEUED', 'DELIVERY_DELAYED']);
});
