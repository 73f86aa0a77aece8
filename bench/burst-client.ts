// The client of the `burst` scenario, in a process of its own so that its bodies are not counted
// in the server's memory: `count` sends of ~`megabytes` MB of text at once, each on its own
// connection, scheduled a year ahead. Prints {statuses: {code: count}} as JSON.
import http from 'node:http';

const [port, key, countArg, megabytesArg] = process.argv.slice(2);
const count = Number(countArg);
const later = new Date(Date.now() + 365 * 86_400_000).toISOString();
const text = 'A line of a long report, with an attachment-sized body. '.repeat(Math.ceil((Number(megabytesArg) * 1048576) / 57));
const body = Buffer.from(JSON.stringify({ from: 'Bench <hello@bench-sender.com>', to: 'user@rcpt0.bench.test', subject: 'Burst', text, scheduledAt: later }));
const agent = new http.Agent({ keepAlive: false, maxSockets: count });

function post(): Promise<string> {
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/v1/emails', method: 'POST', agent, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': body.length } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(String(res.statusCode)));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
    req.end(body);
  });
}

const statuses: Record<string, number> = {};
for (const s of await Promise.all(Array.from({ length: count }, post))) statuses[s] = (statuses[s] ?? 0) + 1;
process.stdout.write(`${JSON.stringify({ statuses })}\n`);
