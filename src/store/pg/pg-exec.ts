import { AsyncLocalStorage } from 'node:async_hooks';
import { CompiledQuery, type Transaction } from 'kysely';
import type pg from 'pg';

/** Runs one SQL statement ($1, $2... parameters) on a connection or inside a transaction. */
export interface PgExec {
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<R[]>;
  /** Rows changed by a statement without RETURNING. */
  run(text: string, params?: readonly unknown[]): Promise<number>;
}

/**
 * Statements the hot paths run over and over are prepared once per connection: a named
 * statement skips parsing and planning on every call after the first.
 */
const statementNames = new Map<string, string>();
function nameOf(text: string): string {
  let name = statementNames.get(text);
  if (!name) {
    name = `ph_${statementNames.size + 1}`;
    statementNames.set(text, name);
  }
  return name;
}

export function clientExec(client: pg.PoolClient | pg.Pool): PgExec {
  return {
    async query<R>(text: string, params: readonly unknown[] = []) {
      const res = await client.query({ text, values: params as unknown[], name: nameOf(text) });
      return res.rows as R[];
    },
    async run(text: string, params: readonly unknown[] = []) {
      const res = await client.query({ text, values: params as unknown[], name: nameOf(text) });
      return res.rowCount ?? 0;
    },
  };
}

export function kyselyExec(trx: Transaction<any>): PgExec {
  return {
    async query<R>(text: string, params: readonly unknown[] = []) {
      const res = await trx.executeQuery(CompiledQuery.raw(text, params as unknown[]));
      return res.rows as R[];
    },
    async run(text: string, params: readonly unknown[] = []) {
      const res = await trx.executeQuery(CompiledQuery.raw(text, params as unknown[]));
      return Number(res.numAffectedRows ?? 0n);
    },
  };
}

/*
 * Writes that transactional event handlers (core/events.ts: the webhook outbox, analytics)
 * ask for while a write transaction runs. On SQLite they run at once, synchronously, on the one
 * connection. On PostgreSQL the handlers only queue them here; the transaction writes the
 * queue just before it commits, each kind as one multi-row statement for the whole batch, so
 * the rows still commit or roll back with the change they report.
 */
export interface TxWriteKind<T> {
  name: string;
  /** Kinds are written in this order (lower first). */
  order: number;
  flush(exec: PgExec, items: T[]): Promise<void>;
}

export class TxWrites {
  private readonly parts = new Map<TxWriteKind<any>, unknown[]>();

  add<T>(kind: TxWriteKind<T>, item: T): void {
    const list = this.parts.get(kind);
    if (list) list.push(item);
    else this.parts.set(kind, [item]);
  }

  async flush(exec: PgExec): Promise<void> {
    const kinds = [...this.parts.keys()].sort((a, b) => a.order - b.order);
    for (const kind of kinds) await kind.flush(exec, this.parts.get(kind)!);
    this.parts.clear();
  }
}

const open = new AsyncLocalStorage<TxWrites>();

/** Runs fn with a fresh queue of transactional writes, then writes them with `exec` (still inside the caller's transaction). */
export async function withTxWrites<T>(exec: PgExec, fn: () => T | Promise<T>): Promise<T> {
  const writes = new TxWrites();
  const result = await open.run(writes, fn);
  await writes.flush(exec);
  return result;
}

/** The queue of the write transaction in progress; throws outside one (a handler called where no write is open). */
export function openTxWrites(caller: string): TxWrites {
  const writes = open.getStore();
  if (!writes) throw new Error(`${caller}: no write transaction is open`);
  return writes;
}
