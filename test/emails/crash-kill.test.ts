import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDnsZone } from '../helpers/dns-zone.js';
import { startSmtpSink } from '../helpers/smtp-sink.js';

const BIN = fileURLToPath(new URL('../../../bin/posthorn', import.meta.url));
const MESSAGES = 150;

interface Server {
  child: ChildProcess;
  port: number;
  key?: string;
}

/** Starts `posthorn serve` as a real process and reads its port (and first key) from its output. */
function serve(env: Record<string, string>): Promise<Server> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'serve'], { env: { PATH: process.env.PATH!, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let port: number | undefined;
    const onData = (d: Buffer) => {
      out += d.toString();
      port ??= Number(/HTTP API listening on [^:]+:(\d+)/.exec(out)?.[1]) || undefined;
      if (port && /SMTP listeners started|"inbound"/.test(out)) {
        child.stdout!.off('data', onData);
        resolve({ child, port, key: /(ph_[0-9a-z]{12}_[A-Za-z0-9_-]+)/.exec(out)?.[1] });
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`posthorn exited early (${code}): ${out}`)));
  });
}

test('kill -9 while messages are in flight: after a restart every accepted message is delivered (at least once)', async (t) => {
  const zone = await startDnsZone();
  const sink = await startSmtpSink({ hostname: 'mx.crash.test' });
  zone.set('mx.crash.test', 'A', ['127.0.0.1']);
  zone.set('crash-rcpt.example', 'MX', [{ exchange: 'mx.crash.test', priority: 10 }]);
  const env = {
    POSTHORN_DATA_DIR: mkdtempSync(join(tmpdir(), 'posthorn-crash-')),
    POSTHORN_HTTP_HOST: '127.0.0.1',
    POSTHORN_HTTP_PORT: '0',
    POSTHORN_INBOUND_PORT: '0',
    POSTHORN_SUBMISSION_PORT: '0',
    POSTHORN_HOSTNAME: 'mx.posthorn-crash.test',
    POSTHORN_DNS_SERVERS: zone.server,
    POSTHORN_OUTBOUND_PORT: String(sink.port),
    POSTHORN_RATE_LIMIT: '100000',
    POSTHORN_LOG_LEVEL: 'info',
  };
  let server = await serve(env);
  t.teardown(async () => {
    server.child.kill('SIGKILL');
    await sink.close();
    await zone.close();
  });
  const key = server.key!;
  t.truthy(key, 'the first start printed a key');
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${server.port}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const domain = (await api('POST', '/v1/domains', { name: 'crash-sender.dev', region: 'r' })).body;
  for (const r of domain.dnsRecords) zone.set(r.name, r.type, [r.type === 'MX' ? { exchange: r.value, priority: 10 } : r.value]);
  await api('PUT', `/v1/domains/${domain.id}/verify`);

  const ids: string[] = [];
  const batches = [];
  for (let i = 0; i < MESSAGES; i += 50) {
    batches.push(Array.from({ length: 50 }, (_, j) => ({ from: 'hi@crash-sender.dev', to: `r${i + j}@crash-rcpt.example`, subject: `m${i + j}`, text: 'x' })));
  }
  for (const b of batches) {
    const res = await api('POST', '/v1/emails/batch', b);
    t.is(res.status, 200);
    ids.push(...res.body.data.map((d: { emailId: string }) => d.emailId));
  }
  // Kill the process mid-delivery: some messages are out, others leased or still queued.
  await sink.waitForMessages(10);
  server.child.kill('SIGKILL');
  await new Promise((r) => server.child.once('exit', r));
  const deliveredBeforeKill = new Set(sink.messages.flatMap((m) => m.rcptTo)).size;
  t.log(`${deliveredBeforeKill} of ${MESSAGES} recipients had their message before the kill`);

  server = await serve(env);
  const expected = new Set(Array.from({ length: MESSAGES }, (_, i) => `r${i}@crash-rcpt.example`));
  for (;;) {
    const got = new Set(sink.messages.flatMap((m) => m.rcptTo));
    if ([...expected].every((r) => got.has(r))) break;
    await sink.waitForMessages(sink.messages.length + 1, 20_000);
  }
  // Every accepted email reaches DELIVERED once the restarted engine has recorded the sink's
  // 250 (a moment after the sink saw the message): poll the API, a bounded number of times.
  for (const id of ids) {
    let status = '';
    for (let i = 0; i < 200 && status !== 'DELIVERED'; i++) status = (await api('GET', `/v1/emails/${id}`)).body.latestStatus;
    t.is(status, 'DELIVERED', id);
  }
});
