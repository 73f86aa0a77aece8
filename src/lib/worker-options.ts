/*
 * Command-line options for Posthorn's own worker threads: none. By default a worker inherits the
 * process's execArgv, and Node refuses to start it when that holds options it does not take per
 * thread (V8 heap sizes, --trace-gc, --title, ...: an operator's `node --max-old-space-size=512
 * bin/posthorn serve`). V8 options are process-wide anyway, the workers run compiled scripts
 * that need no loader, and each sizes its heap with its own resourceLimits.
 */
export const WORKER_EXEC_ARGV: string[] = [];
