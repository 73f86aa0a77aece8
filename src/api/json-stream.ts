// A JSON response written piece by piece as the client reads it, for the few bodies that can be
// too big to build in memory at once (a list page whose items carry bodies of tens of MB).
// Koa's default would JSON.stringify the whole value into one string first.

/** What a route handler returns instead of its body to have it streamed (same JSON, same schema). */
export class JsonStream {
  constructor(readonly chunks: AsyncIterable<string>) {}
}

/** `{"data":[...items],"count":n}`, one item serialized at a time. */
export function jsonPage(items: AsyncIterable<unknown>, count: number): JsonStream {
  async function* chunks(): AsyncGenerator<string> {
    yield '{"data":[';
    let first = true;
    for await (const item of items) {
      yield (first ? '' : ',') + JSON.stringify(item);
      first = false;
    }
    yield `],"count":${JSON.stringify(count)}}`;
  }
  return new JsonStream(chunks());
}
