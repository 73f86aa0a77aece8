// The console's CSV import and the main thread: how long at most one turn of the event loop is
// held (monitorEventLoopDelay's max, and the longest gap between 1 ms timer ticks) while a
// 20 MB file is uploaded and while it is imported, and how long each takes. Not part of
// `npm run bench`: run it alone, `node dist/bench/csv-import-fairness.js [plain|quoted] [rows]
// [upload]` (upload: stop once the upload is answered, without waiting for the import).
// The client (fetch) runs in this process too; its share of a turn is small (it streams the body).
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { startTestApp } from '../test/helpers/test-app.js';
import { ConsoleClient, consoleUser } from '../test/console/helpers/console-client.js';

const kind = process.argv[2] === 'quoted' ? 'quoted' : 'plain';
const rows = Number(process.argv[3] ?? 200_000);

/** ~100 bytes a row: 200,000 rows are ~20 MB (the upload limit). */
function csvFile(): string {
  const out: string[] = ['email,firstName,lastName,plan,city,note'];
  for (let i = 0; i < rows; i++) {
    if (kind === 'plain') out.push(`person${i}@example.org,Firstname${i % 997},Lastname${i % 991},pro,Springfield,a note of some length ${i}xxxxxxxx`);
    // Every field quoted, with embedded commas, doubled quotes and a line break.
    else out.push(`"p${i}@example.org","Ann, ""A"" ${i % 97}","Lee, Jr","p,r,o","Spring""field","a ""note"", with\nbreak ${i}"`);
  }
  return out.join('\r\n') + '\r\n';
}

function watch() {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  let last = performance.now();
  let longest = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 1);
  return () => {
    h.disable();
    clearInterval(tick);
    return { loopDelayMaxMs: Math.round(h.max / 1e5) / 10, longestGapMs: Math.round(longest * 10) / 10, p99Ms: Math.round(h.percentile(99) / 1e5) / 10 };
  };
}

const app = await startTestApp();
try {
  await consoleUser(app.app, 'bench@csv.bench', app.teamId);
  const c = new ConsoleClient(app.baseUrl);
  await c.signIn('bench@csv.bench');
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Bench' } })).body as { id: string };
  const text = csvFile();
  const token = await c.csrf();
  const form = new FormData();
  form.append('_csrf', token);
  form.append('file', new Blob([text], { type: 'text/csv' }), 'big.csv');
  console.log(`${kind}: ${rows} rows, ${(Buffer.byteLength(text) / 1024 / 1024).toFixed(1)} MB`);

  let stop = watch();
  let started = performance.now();
  const res = await c.request('POST', `/console/contacts/${book.id}/import`, { body: form, headers: { origin: app.baseUrl } });
  const uploadMs = Math.round(performance.now() - started);
  const upload = stop();
  const importId = /imports\/([^/?]+)/.exec(res.location ?? '')?.[1];
  if (res.status !== 303 && res.status !== 302) throw new Error(`upload answered ${res.status}: ${res.text.slice(0, 300)}`);
  console.log(`upload (POST until the redirect): ${uploadMs} ms`, upload);
  if (process.argv[4] === 'upload') process.exit(0);

  stop = watch();
  started = performance.now();
  await app.app.services.contactImports.whenFinished(importId!);
  const importMs = Math.round(performance.now() - started);
  const imported = stop();
  const job = await app.app.services.contactImports.get({ teamId: app.teamId, domainId: null }, importId!);
  console.log(`import (after the redirect until DONE): ${importMs} ms`, imported, { status: job.status, processed: job.processedRows, created: job.created, refused: job.errorCount });
} finally {
  await app.close();
}
