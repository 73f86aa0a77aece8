// The acceptance ceiling: the least a JSON API that stores each request can do on this machine.
// A bare Koa route that parses the JSON body and inserts it into SQLite (WAL, one row per
// request, synchronous=NORMAL: cheaper than Posthorn's durable default). Run as its own
// process; prints {port} on stdout once listening, exits on SIGTERM.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import Koa from 'koa';

const db = new Database(join(mkdtempSync(join(tmpdir(), 'posthorn-ceiling-')), 'c.db'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.exec('create table emails (id integer primary key, body text not null, created_at text not null)');
const insert = db.prepare('insert into emails (body, created_at) values (?, ?)');

const app = new Koa();
app.use(async (ctx) => {
  if (ctx.method !== 'POST') return;
  const chunks: Buffer[] = [];
  for await (const c of ctx.req) chunks.push(c as Buffer);
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  const { lastInsertRowid } = insert.run(JSON.stringify(body), new Date().toISOString());
  ctx.body = { emailId: String(lastInsertRowid) };
});
const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
