import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/test-app.js';
import { fencedBlocks, section } from './helpers/markdown.js';

// README's "Try it" is the front door: its curl commands, run as written (the key in $KEY) against
// a server in sandbox mode, add the domain, send, and find the mail in the capture mailbox; and
// the next steps its prose names (the email DELIVERED with MX sandbox, the sm_... message with
// the signed message and its parts) hold.

let t0: TestApp;
test.before(async () => {
  t0 = await startTestApp({ overrides: { sandbox: true } });
});
test.after.always(async () => {
  await t0?.close();
});

/** The words of a shell command line: single and double quotes, backslash escapes inside double quotes, $KEY expanded. */
function shellWords(line: string, env: Record<string, string>): string[] {
  const words: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '#' && word === undefined) break;
    if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      word = (word ?? '') + line.slice(i + 1, end);
      i = end;
    } else if (c === '"') {
      let j = i + 1;
      let text = '';
      for (; line[j] !== '"'; j++) text += line[j] === '\\' ? line[++j] : line[j];
      word = (word ?? '') + text.replace(/\$(\w+)/g, (_, name: string) => env[name] ?? '');
      i = j;
    } else if (c === '$') {
      const name = /^\$(\w+)/.exec(line.slice(i))![1]!;
      word = (word ?? '') + (env[name] ?? '');
      i += name.length;
    } else word = (word ?? '') + c;
  }
  if (word !== undefined) words.push(word);
  return words;
}

interface Curl {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

function parseCurl(words: string[]): Curl {
  const out: Curl = { method: 'GET', path: '', headers: {} };
  for (let i = 1; i < words.length; i++) {
    const w = words[i]!;
    if (w === '-X') out.method = words[++i]!;
    else if (w === '-H') {
      const [name, ...value] = words[++i]!.split(':');
      out.headers[name!.trim()] = value.join(':').trim();
    } else if (w === '-d') {
      out.body = words[++i]!;
      if (out.method === 'GET') out.method = 'POST';
    } else if (/^https?:\/\//.test(w)) out.path = new URL(w).pathname + new URL(w).search;
    else throw new Error(`curl option the test does not know: ${w}`);
  }
  return out;
}

test.serial('the README quick start, run as written in sandbox mode, delivers an email to the capture mailbox', async (t) => {
  const tryIt = section('README.md', 'Try it: a delivered email in three commands (sandbox mode)');
  const block = fencedBlocks('README.md').find((b) => tryIt.includes(b.text) && b.text.includes('curl'));
  if (!block) return t.fail('no curl block in the README\'s Try it');
  const lines = block.text.replace(/\\\n\s*/g, ' ').split('\n').filter((l) => l.startsWith('curl '));
  t.is(lines.length, 3, 'add a domain, send, read the mailbox');
  const responses: any[] = [];
  for (const line of lines) {
    const curl = parseCurl(shellWords(line, { KEY: t0.key }));
    const res = await fetch(`${t0.baseUrl}${curl.path}`, { method: curl.method, headers: curl.headers, body: curl.body });
    const body = await res.json();
    t.is(res.status, 200, `${line}\n${JSON.stringify(body)}`);
    responses.push(body);
    // What `npm start` does between the send and a look at the mailbox: the engine delivers.
    if (curl.path === '/v1/emails') {
      t0.app.engine.wake();
      await t0.app.engine.whenIdle();
    }
  }
  const [domain, sent, mailbox] = responses;
  t.is(domain.status, 'PENDING', 'never verified: sandbox mode sends anyway');
  t.regex(sent.emailId, /^em_/);
  t.is(mailbox.messages.length, 1);
  t.is(mailbox.messages[0].emailId, sent.emailId);

  // The prose after it: GET /v1/emails/{id} is DELIVERED (MX sandbox), and the sm_... id (not the em_...) opens the message.
  const after = section('README.md', 'Try it: a delivered email in three commands (sandbox mode)');
  t.regex(after, /`GET \/v1\/emails\/\{id\}` shows it `DELIVERED` \(MX `sandbox`\)/);
  const email = (await t0.request('GET', `/v1/emails/${sent.emailId}`)).body;
  t.is(email.latestStatus, 'DELIVERED');
  t.is(email.emailEvents.at(-1).data.mxHost, 'sandbox');
  t.regex(after, /`GET \/v1\/sandbox\/messages\/\{id\}`, with\s+the `sm_\.\.\.` id from that list/);
  const one = (await t0.request('GET', `/v1/sandbox/messages/${mailbox.messages[0].id}`)).body;
  t.regex(one.raw, /^DKIM-Signature: /m);
  t.is(one.parsed.subject, 'Hi');
  t.is((await t0.request('GET', `/v1/sandbox/messages/${sent.emailId}`)).status, 404);
});

test.serial('the README\'s verify step, run as written, answers as api.md says: the status and what is missing, then SUCCESS once the records are there', async (t) => {
  const real = section('README.md', 'Sending for real');
  const line = /`(curl -X PUT [^`]+\/verify)`/.exec(real)?.[1];
  if (!line) return t.fail('no verify curl in Sending for real');
  const curl = parseCurl(shellWords(line, { KEY: t0.key }));
  const domains = (await t0.request('GET', '/v1/domains')).body;
  t.is(domains[0]?.id, 1, 'the README names domain 1: the first one added');
  const verify = async () => {
    const res = await fetch(`${t0.baseUrl}${curl.path}`, { method: curl.method, headers: curl.headers });
    t.is(res.status, 200);
    return ((await res.json()) as { message: string }).message;
  };
  const api = section('docs/api.md', 'Domains');
  t.true(api.includes('`Domain verified: all required DNS records were found`'));
  t.regex(api, /`Domain\s+verification finished with status PENDING: \.\.\.`/);
  t.regex(await verify(), /^Domain verification finished with status PENDING: .*DKIM TXT posthorn\._domainkey\.example\.com/);
  for (const r of domains[0].dnsRecords) t0.zone.set(r.name, r.type, r.type === 'MX' ? [{ exchange: r.value, priority: Number(r.priority) }] : [r.value]);
  t.is(await verify(), 'Domain verified: all required DNS records were found');
});
