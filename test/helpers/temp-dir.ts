import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExecutionContext } from 'ava';

/** A fresh directory under the OS temp dir, removed when the test or hook that asked for it ends. */
export function tempDir(t: Pick<ExecutionContext, 'teardown'>, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
