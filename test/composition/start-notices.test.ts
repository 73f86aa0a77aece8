import test from 'ava';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/load.js';
import { announceReady } from '../../src/composition/start-notices.js';

// The serve.ready line, in the shapes npm-start.test.ts does not start: PostgreSQL (its target,
// never its password), a public URL that is set, the console off.

function readyLine(env: Record<string, string>, httpPort = 3000): any {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => lines.push(s) });
  announceReady(loadConfig({ env }), logger, httpPort);
  return JSON.parse(lines[0]!);
}

test('on PostgreSQL the store is named by host, port and database, without the password', (t) => {
  const line = readyLine({ POSTHORN_DATABASE_URL: 'postgres://posthorn:s3cret@db.internal:5433/mail', POSTHORN_DATA_DIR: '/var/lib/posthorn' });
  t.like(line, { event: 'serve.ready', store: 'PostgreSQL db.internal:5433/mail', dataDir: '/var/lib/posthorn' });
  t.false(JSON.stringify(line).includes('s3cret'));
});

test('a public URL that is set is the one named; with port 0 the derived one names the port listened on; the console can be off', (t) => {
  t.like(readyLine({ POSTHORN_PUBLIC_URL: 'https://mail.example.com' }), { url: 'https://mail.example.com', console: 'https://mail.example.com/console' });
  t.like(readyLine({ POSTHORN_HTTP_PORT: '0', POSTHORN_HTTP_HOST: '127.0.0.1' }, 41234), { url: 'http://127.0.0.1:41234' });
  const off = readyLine({ POSTHORN_CONSOLE_ENABLED: 'false' });
  t.is(off.console, null);
  t.regex(off.msg, /^Posthorn is running: API at http:\/\/localhost:3000\/v1, console off, data in \//);
});
