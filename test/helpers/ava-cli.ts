// ava's command line, as `npm test` runs it (run-suites.ts), with one repair to ava 7's TAP
// reporter: when a test times out (or a test file calls process.exit) it hands the reporter a
// plain Error where the reporter expects ava's serialized form, and the reporter throws instead
// of writing `not ok`: the run ends with a crash that names no test, or hangs. ava 8 needs Node
// 22. The repair gives such an Error the serialized shape; everything else is ava's own.

const avaDir = new URL('../../../node_modules/ava/', import.meta.url);

interface SerializedError {
  type: string;
  name: string;
  originalError: { message: string; name?: string; stack?: string };
  stack: string;
  formattedDetails: unknown[];
}

type WriteTest = (evt: { err?: unknown }, flags: unknown) => void;

const tap = (await import(new URL('lib/reporters/tap.js', avaDir).href)) as { default: { prototype: { writeTest?: WriteTest } } };
const proto = tap.default.prototype;
const writeTest = proto.writeTest;
if (typeof writeTest === 'function') {
  proto.writeTest = function (this: unknown, evt, flags) {
    const err = evt.err;
    if (err instanceof Error) {
      const serialized: SerializedError = { type: 'native', name: err.name, originalError: { message: err.message }, stack: err.stack ?? '', formattedDetails: [] };
      evt = { ...evt, err: serialized };
    }
    writeTest.call(this, evt, flags);
  };
}

await import(new URL('entrypoints/cli.mjs', avaDir).href);
