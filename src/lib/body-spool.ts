import { createWriteStream, mkdirSync, readdirSync, rmSync, statSync, type WriteStream } from 'node:fs';
import { readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';

/** A body received whole, in memory or in a spool file, until release(). */
export interface SpooledBody {
  readonly size: number;
  /** The bytes, when the body is in memory (null: read() them from the file). */
  bytes(): Buffer | null;
  read(): Promise<Buffer>;
  /** Gives back its memory or deletes its file; call once, when the body is no longer needed. */
  release(): void;
}

export type Received = { oversized: false; body: SpooledBody } | { oversized: true; bytes: number };

/** Writing a body to its spool file or reading it back failed (disk full, I/O error). */
export class SpoolError extends Error {
  /** The system's error code (ENOSPC, EIO...), so the edges report it as the storage failure it is. */
  readonly code: string;
  constructor(override readonly cause: unknown) {
    super(`the body spool failed: ${(cause as Error).message}`);
    this.name = 'SpoolError';
    const code = (cause as { code?: unknown } | null)?.code;
    this.code = typeof code === 'string' ? code : 'EIO';
  }
}

/** The stream ended without its end (a client gone mid-body). */
export class BodyAbortedError extends Error {
  constructor() {
    super('the body was cut off before its end');
    this.name = 'BodyAbortedError';
  }
}

const FILE_SUFFIX = '.body';

function modifiedMs(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return Infinity; // gone meanwhile: nothing to remove
  }
}

function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Where bodies wait while they are received: API requests, submitted and inbound messages. A
 * body is read whole before anything is done with it, and then may wait its turn (the intake
 * budget); held in memory, a few hundred slow or waiting bodies of tens of megabytes each would
 * fill it. So a body stays in memory only while the bodies held in memory total at most
 * `memoryLimitBytes`; the next ones are written to files in `dir` as they arrive (the source is
 * paused while the disk catches up) and read back when their turn comes. Nothing in the spool
 * is accepted yet: a file outlives its body only when the process is killed, and is removed
 * when the directory is next opened.
 */
export class BodySpool {
  private held = 0;
  private files = 0;
  private sequence = 0;

  private constructor(
    private readonly dir: string,
    readonly memoryLimitBytes: number,
  ) {}

  /** Creates `dir` and removes the files of processes no longer running (several on one data dir may share it). */
  static open(dir: string, memoryLimitBytes: number): BodySpool {
    // Received mail: its owner's alone, as the store is.
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // A server restarted in a container often gets its predecessor's pid: a file with our pid
    // written before we started is that predecessor's.
    const startedMs = Date.now() - process.uptime() * 1000;
    for (const name of readdirSync(dir)) {
      if (!name.endsWith(FILE_SUFFIX)) continue;
      const path = join(dir, name);
      const pid = Number(name.split('-')[0]);
      const dead = pid === process.pid ? modifiedMs(path) < startedMs : !processAlive(pid);
      if (dead) rmSync(path, { force: true });
    }
    return new BodySpool(dir, memoryLimitBytes);
  }

  /** Bytes of received bodies held in memory now. */
  get memoryBytes(): number {
    return this.held;
  }

  /** Received bodies in spool files now. */
  get filesOpen(): number {
    return this.files;
  }

  /**
   * Reads `source` to its end. Past `limit` bytes it keeps nothing, resolves at once with
   * `oversized` and lets the rest of the source flow away unread (wait for the source's end
   * where the protocol needs it). Rejects with BodyAbortedError if the source closes or fails
   * before its end, SpoolError if the disk fails; nothing is kept either way.
   */
  receive(source: Readable, limit: number): Promise<Received> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let inMemory = 0;
      let file: WriteStream | undefined;
      let path = '';
      let settled = false;

      const drop = () => {
        this.held -= inMemory;
        inMemory = 0;
        chunks.length = 0;
        if (file) {
          file.destroy();
          this.removeFile(path);
          file = undefined;
        }
      };
      const detach = () => {
        source.off('data', onData);
        source.off('end', onEnd);
        source.off('error', onError);
        source.off('close', onClose);
        source.off('aborted', onClose);
      };
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        detach();
        drop();
        // Whatever still comes is not wanted; keep the source from stalling its connection.
        source.on('error', () => {});
        source.resume();
        reject(err);
      };
      // The source failing or closing before its end: the body is incomplete, whatever the cause.
      const onClose = () => fail(new BodyAbortedError());
      const onError = onClose;
      const toDisk = (chunk: Buffer) => {
        path = join(this.dir, `${process.pid}-${++this.sequence}${FILE_SUFFIX}`);
        file = createWriteStream(path, { flags: 'wx', mode: 0o600 });
        this.files++;
        file.on('error', (err) => fail(new SpoolError(err)));
        for (const c of chunks) file.write(c);
        this.held -= inMemory;
        inMemory = 0;
        chunks.length = 0;
        write(chunk);
      };
      const write = (chunk: Buffer) => {
        if (file!.write(chunk)) return;
        // The disk is behind: stop reading the socket until it catches up.
        source.pause();
        file!.once('drain', () => {
          if (!settled) source.resume();
        });
      };
      const onData = (chunk: Buffer) => {
        size += chunk.length;
        if (size > limit) {
          settled = true;
          detach();
          drop();
          source.on('data', () => {});
          source.on('error', () => {});
          source.resume();
          resolve({ oversized: true, bytes: size });
          return;
        }
        if (file) write(chunk);
        else if (this.held + chunk.length <= this.memoryLimitBytes) {
          chunks.push(chunk);
          inMemory += chunk.length;
          this.held += chunk.length;
        } else toDisk(chunk);
      };
      const onEnd = () => {
        if (settled) return;
        detach();
        if (!file) {
          settled = true;
          resolve({ oversized: false, body: this.memoryBody(chunks.slice(), size) });
          return;
        }
        const spooled = file;
        const spooledPath = path;
        // 'finish': every byte is in the file (a failure goes to the 'error' handler instead).
        spooled.once('finish', () => {
          if (settled) return;
          settled = true;
          resolve({ oversized: false, body: this.fileBody(spooledPath, size) });
        });
        spooled.end();
      };
      source.on('data', onData);
      source.once('end', onEnd);
      source.once('error', onError);
      source.once('close', onClose);
      // An HTTP request whose client went away mid-body says so with 'aborted'.
      source.once('aborted', onClose);
      source.resume();
    });
  }

  private memoryBody(chunks: Buffer[], size: number): SpooledBody {
    let released = false;
    const bytes = () => {
      // Joined once, and the pieces let go: the body is not held twice.
      if (chunks.length > 1) chunks.splice(0, chunks.length, Buffer.concat(chunks, size));
      return chunks[0] ?? Buffer.alloc(0);
    };
    return {
      size,
      bytes,
      read: async () => bytes(),
      release: () => {
        if (released) return;
        released = true;
        this.held -= size;
        chunks.length = 0;
      },
    };
  }

  private fileBody(path: string, size: number): SpooledBody {
    let released = false;
    return {
      size,
      bytes: () => null,
      read: () =>
        readFile(path).catch((err: unknown) => {
          throw new SpoolError(err);
        }),
      release: () => {
        if (released) return;
        released = true;
        this.removeFile(path);
      },
    };
  }

  private removeFile(path: string): void {
    this.files--;
    // A file left behind (the disk failing) is removed at the next start.
    unlink(path).catch(() => {});
  }
}
