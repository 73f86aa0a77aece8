// DKIM signing throughput: signatures per second for ~3 KB messages with a fresh RSA-2048
// key, in-thread (workers: 0) and with 1 and 2 worker threads, plus mailauth's own
// dkimSign() in-thread as the baseline (it re-parses the PEM key on every call).
// "cpu" is the CPU time of all threads per signature (steadier than sig/s on a shared box);
// "main busy" is the main thread's event-loop utilization while signing: what is left of
// it for SMTP and SQLite.
//
//   npx tsc -p tsconfig.json && node dist/bench/dkim-sign-bench.js [messages]
import { generateKeyPairSync } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { createDkimSigner, type DkimKey } from '../src/smtp/outbound/dkim-signer.js';
import { composeMessage } from '../src/smtp/outbound/mime-builder.js';

const MESSAGES = Number(process.argv[2] ?? 2000);
const WARMUP_MESSAGES = 50;
const VERIFIED_SAMPLE = 20;
const TARGET_MESSAGE_BYTES = 3 * 1024;

const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const key: DkimKey = { domain: 'bench.test', selector: 'bench', privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
const dnsRecord = `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;
const resolver = async (name: string, rrtype: string): Promise<string[][]> => {
  if (rrtype === 'TXT' && name === `${key.selector}._domainkey.${key.domain}`) return [[dnsRecord]];
  throw Object.assign(new Error(`ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
};

async function buildMessages(): Promise<Buffer[]> {
  const paragraph = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore. ';
  const messages: Buffer[] = [];
  for (let i = 0; i < MESSAGES; i++) {
    messages.push(
      await composeMessage({
        from: 'Bench <news@bench.test>',
        to: [`user${i}@example.com`],
        cc: [],
        replyTo: [],
        subject: `Weekly digest #${i}`,
        text: paragraph.repeat(11),
        html: `<html><body><p>${paragraph.repeat(11)}</p></body></html>`,
        headers: { 'List-Unsubscribe': `<https://bench.test/u/${i}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
        attachments: [],
        messageId: `<${i}.bench@bench.test>`,
        date: new Date(),
      }),
    );
  }
  return messages;
}

interface Run {
  label: string;
  sign(message: Buffer): Promise<Buffer>;
  close(): Promise<void>;
}

async function measure(run: Run, messages: Buffer[]): Promise<void> {
  await Promise.all(messages.slice(0, WARMUP_MESSAGES).map((m) => run.sign(m)));
  const elu = performance.eventLoopUtilization();
  const cpu = process.cpuUsage();
  const started = performance.now();
  const signed = await Promise.all(messages.map((m) => run.sign(m)));
  const elapsedMs = performance.now() - started;
  const busy = performance.eventLoopUtilization(elu).utilization;
  // all threads of the process: robust to other load on the box, unlike wall-clock sig/s
  const { user, system } = process.cpuUsage(cpu);
  const cpuPerSignatureUs = (user + system) / messages.length;
  await run.close();

  let passed = 0;
  for (const s of signed.slice(0, VERIFIED_SAMPLE)) {
    const { results } = await dkimVerify(s, { resolver });
    if (results[0]?.status.result === 'pass') passed++;
  }
  const perSecond = (messages.length / elapsedMs) * 1000;
  console.log(
    `${run.label.padEnd(38)} ${String(Math.round(perSecond)).padStart(6)} sig/s  ${elapsedMs.toFixed(0).padStart(6)} ms  ` +
      `cpu ${cpuPerSignatureUs.toFixed(0).padStart(5)} us/sig  main busy ${(busy * 100).toFixed(0).padStart(3)}%  verified ${passed}/${VERIFIED_SAMPLE}`,
  );
}

const messages = await buildMessages();
const averageBytes = messages.reduce((n, m) => n + m.length, 0) / messages.length;
console.log(`${messages.length} messages of ~${Math.round(averageBytes)} bytes (target ${TARGET_MESSAGE_BYTES}), RSA-2048, node ${process.version}`);

for (const workers of [0, 1, 2]) {
  const signer = createDkimSigner({ workers });
  await measure({ label: `createDkimSigner({ workers: ${workers} })`, sign: (m) => signer.sign(m, key), close: () => signer.close() }, messages);
}
await measure(
  {
    label: 'mailauth dkimSign() in-thread',
    async sign(m) {
      const { signatures } = await dkimSign(m, {
        signTime: new Date(),
        signatureData: [{ signingDomain: key.domain, selector: key.selector, privateKey: key.privateKey }],
      } as Parameters<typeof dkimSign>[1]);
      return Buffer.concat([Buffer.from(signatures), m]);
    },
    close: async () => {},
  },
  messages,
);
