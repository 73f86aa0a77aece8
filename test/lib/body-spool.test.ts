import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import test from 'ava';
import { BodyAbortedError, BodySpool, SpoolError } from '../../src/lib/body-spool.js';
import { until } from '../helpers/until.js';

function spoolDir(): string {
  return join(mkdtempSync(join(tmpdir(), 'posthorn-spool-')), 'spool');
}

/** Distinct bytes, so that a chunk written twice or out of order shows. */
function pattern(size: number, seed: number): Buffer {
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

function source(bytes: Buffer, chunk = 16 * 1024): Readable {
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += chunk) parts.push(bytes.subarray(i, i + chunk));
  return Readable.from(parts);
}

test('bodies stay in memory while they fit in its share; the next go to files; each reads back exactly', async (t) => {
  const dir = spoolDir();
  const spool = BodySpool.open(dir, 100_000);
  const a = pattern(60_000, 1);
  const b = pattern(70_000, 2); // does not fit beside a
  const c = pattern(3 * 1024 * 1024, 3); // megabytes: the file write stalls and the source is paused
  const ra = await spool.receive(source(a), 10_000_000);
  const rb = await spool.receive(source(b), 10_000_000);
  const rc = await spool.receive(source(c), 10_000_000);
  if (ra.oversized || rb.oversized || rc.oversized) return t.fail('not oversized');
  t.truthy(ra.body.bytes(), 'in memory');
  t.is(rb.body.bytes(), null, 'in a file');
  t.is(rc.body.bytes(), null, 'in a file');
  t.is(spool.memoryBytes, 60_000);
  t.is(spool.filesOpen, 2);
  t.is(readdirSync(dir).length, 2);
  // Received mail is the server user's alone, whatever the umask.
  t.is(statSync(dir).mode & 0o777, 0o700);
  for (const name of readdirSync(dir)) t.is(statSync(join(dir, name)).mode & 0o777, 0o600, name);
  t.true((await ra.body.read()).equals(a));
  t.true((await rb.body.read()).equals(b));
  t.true((await rc.body.read()).equals(c));
  t.is(rc.body.size, c.length);
  for (const r of [ra, rb, rc]) r.body.release();
  ra.body.release(); // twice is harmless
  t.is(spool.memoryBytes, 0);
  t.is(spool.filesOpen, 0);
  await until(() => readdirSync(dir).length === 0);
  t.pass();
});

test('a body over the limit keeps nothing and resolves at once; the rest of the source still flows away', async (t) => {
  const dir = spoolDir();
  const spool = BodySpool.open(dir, 10_000);
  const stream = new PassThrough();
  const received = spool.receive(stream, 50_000);
  stream.write(pattern(30_000, 1)); // past the memory share: to a file
  stream.write(pattern(30_000, 2)); // past the limit
  const r = await received;
  t.true(r.oversized);
  if (r.oversized) t.is(r.bytes, 60_000);
  t.is(spool.memoryBytes, 0);
  t.is(spool.filesOpen, 0);
  // Nobody reads the rest, yet it is not left to fill the buffers: the stream still ends.
  const ended = new Promise((resolve) => stream.once('end', resolve));
  stream.end(pattern(200_000, 3));
  await ended;
  await until(() => readdirSync(dir).length === 0);
});

test('a source cut off mid-body rejects, and nothing of it is kept, in memory or on disk', async (t) => {
  const dir = spoolDir();
  const spool = BodySpool.open(dir, 10_000);
  for (const first of [5_000, 50_000]) {
    const stream = new PassThrough();
    const received = spool.receive(stream, 1_000_000);
    stream.write(pattern(first, 1));
    await new Promise((r) => setImmediate(r));
    stream.destroy();
    await t.throwsAsync(received, { instanceOf: BodyAbortedError });
    t.is(spool.memoryBytes, 0);
    t.is(spool.filesOpen, 0);
  }
  // An HTTP request whose client went away says 'aborted' and may never end or close.
  const request = new PassThrough();
  const received = spool.receive(request, 1_000_000);
  request.write(pattern(1_000, 1));
  await new Promise((r) => setImmediate(r));
  request.emit('aborted');
  await t.throwsAsync(received, { instanceOf: BodyAbortedError });
  t.is(spool.memoryBytes, 0);
  await until(() => readdirSync(dir).length === 0);
});

test('a disk that can not take the file is a SpoolError with the system code; nothing is kept', async (t) => {
  const dir = spoolDir();
  const spool = BodySpool.open(dir, 1_000);
  rmSync(dir, { recursive: true });
  const err = await t.throwsAsync(spool.receive(source(pattern(10_000, 1)), 1_000_000), { instanceOf: SpoolError });
  t.is(err?.code, 'ENOENT');
  t.is(spool.memoryBytes, 0);
  t.is(spool.filesOpen, 0);
});

test('opening the spool removes the files of processes that are gone and keeps those of live ones', (t) => {
  const dir = spoolDir();
  BodySpool.open(dir, 1_000);
  const dead = join(dir, '2147483646-1.body');
  const live = join(dir, `${process.pid}-1.body`);
  // Our own pid, but written before this process started: a predecessor that had the same pid.
  const predecessor = join(dir, `${process.pid}-2.body`);
  const other = join(dir, 'README');
  for (const f of [dead, live, predecessor, other]) writeFileSync(f, 'x');
  const before = new Date(Date.now() - process.uptime() * 1000 - 60_000);
  utimesSync(predecessor, before, before);
  BodySpool.open(dir, 1_000);
  t.false(existsSync(dead));
  t.false(existsSync(predecessor));
  t.true(existsSync(live));
  t.true(existsSync(other));
});
