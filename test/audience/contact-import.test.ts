import test from 'ava';
import { pino } from 'pino';
import { contactsCsvHeader, contactsCsvLines, contactsFromCsv, CSV_PIECE_CHARS, csvCursor, MAX_CSV_BYTES, parseCsv, readContactsCsv } from '../../src/core/contacts/contact-csv.js';
import { createContactImportService, IMPORT_CHUNK_ROWS, MAX_RUNNING_IMPORTS } from '../../src/core/contacts/contact-import-service.js';
import { createContactImportsRepository } from '../../src/store/repositories/contact-imports-repository.js';
import type { ContactService, ContactView } from '../../src/core/contacts/contact-service.js';
import { AppError } from '../../src/core/errors.js';
import { startTestApp } from '../helpers/test-app.js';
import { tempDir } from '../helpers/temp-dir.js';
import { twoTeams } from '../helpers/two-teams.js';

// CSV import and export of contacts (the console's), and the import job's durability.


/** The contact service with every bulk add held until release(): imports stay RUNNING inside their first chunk. */
function heldContacts(real: ContactService): { contacts: ContactService; release: () => void } {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const contacts: ContactService = {
    ...real,
    async bulkAdd(...args: Parameters<ContactService['bulkAdd']>) {
      await released;
      return real.bulkAdd(...args);
    },
  };
  return { contacts, release };
}

test('CSV: quotes, doubled quotes, line breaks inside fields, CRLF, a BOM and ";" files; records keep their first line', (t) => {
  const { records, error } = parseCsv('\uFEFFa,b\r\n"x, ""y""","two\nlines"\r\n\r\nlast,row');
  t.is(error, undefined);
  t.deepEqual(records, [
    { line: 1, fields: ['a', 'b'] },
    { line: 2, fields: ['x, "y"', 'two\nlines'] },
    { line: 5, fields: ['last', 'row'] },
  ]);
  t.deepEqual(parseCsv('email;plan\nx@example.org;pro\n').records[1]!.fields, ['x@example.org', 'pro']);
  t.deepEqual(parseCsv('a,"open\nnever closed').error, { line: 1, message: 'a quoted field opened on line 1 is never closed' });
});

test('CSV: a field of quotes after text, or of spaces then quotes, at the 20 MB upload limit is read in linear time', (t) => {
  // Each '"' outside a quoted field asked whether the field so far was only spaces by scanning it:
  // 1 MB of such quotes took minutes of the only thread, 20 MB would take days.
  const quotes = '"'.repeat(MAX_CSV_BYTES - 2 * 1024 * 1024);
  const rows = contactsFromCsv(`email\n${' '.repeat(1024 * 1024)}x${quotes}\n`);
  t.is(rows.length, 1);
  t.is(rows[0]!.email, `x${quotes}`);
  const { records } = parseCsv(`a\nb${quotes}\n  "c"\n`);
  t.is(records[1]!.fields[0]!.length, quotes.length + 1);
  t.deepEqual(records[2]!.fields, ['c']);
});

test('CSV: old-Mac CR-only line breaks, a quoted field after spaces, and line numbers stay right', (t) => {
  // CR alone ends a line as LF and CRLF do, inside a quoted field too (the line count goes on).
  t.deepEqual(parseCsv('email,name\ra@x.org,"Ann\rLee"\r\rb@x.org,Bo\r').records, [
    { line: 1, fields: ['email', 'name'] },
    { line: 2, fields: ['a@x.org', 'Ann\rLee'] },
    { line: 5, fields: ['b@x.org', 'Bo'] },
  ]);
  t.deepEqual(parseCsv('a,b\r"open\rnever closed').error, { line: 2, message: 'a quoted field opened on line 2 is never closed' });
  // Spaces before and after a quoted field are not part of it; inside the quotes they are.
  t.deepEqual(parseCsv('a@x.org, "Smith, Ann" ,"x ""y"" "\n').records[0]!.fields, ['a@x.org', 'Smith, Ann', 'x "y" ']);
  // An unquoted field keeps a quote that does not open it.
  t.deepEqual(parseCsv('a "b" c,d\n').records[0]!.fields, ['a "b" c', 'd']);
  const rows = contactsFromCsv('email,lastName\ra@x.org, "Smith, Ann"\r');
  t.deepEqual(rows, [{ line: 2, email: 'a@x.org', body: { email: 'a@x.org', lastName: 'Smith, Ann' } }]);
});

test('CSV: fields sliced between delimiters read tricky files right: quotes, doubled quotes, line breaks in fields, empty fields, a BOM, with or without a last line break', (t) => {
  const cases: [string, string[][]][] = [
    ['a,b', [['a', 'b']]],
    ['a,b\n', [['a', 'b']]],
    ['a,b\r\n', [['a', 'b']]],
    ['\uFEFFa,b\r\nc,d', [['a', 'b'], ['c', 'd']]],
    [',,\n,x,\n', [['', '', ''], ['', 'x', '']]],
    ['a,\n', [['a', '']]],
    ['"",""\n""', [['', '']]],
    ['"a""b","""","x""""y"', [['a"b', '"', 'x""y']]],
    ['"multi\r\nline, with comma",z\r\nnext,row', [['multi\r\nline, with comma', 'z'], ['next', 'row']]],
    ['"ends with quote"""\n"""starts"', [['ends with quote"'], ['"starts']]],
    ['  "padded" ,  plain  ,"q"x y', [['padded', '  plain  ', 'qx y']]],
    ['"a" "b",c', [['a "b"', 'c']]],
    ['un"quoted"here,"', []],
  ];
  for (const [text, rows] of cases) t.deepEqual(parseCsv(text).records.map((r) => r.fields), rows, JSON.stringify(text));
  t.deepEqual(parseCsv('un"quoted"here,"').error, { line: 1, message: 'a quoted field opened on line 1 is never closed' });
  // Lines of later records count the line breaks inside quoted fields.
  t.deepEqual(parseCsv('h\n"1\n2\r\n3\r4"\nnext\n').records.map((r) => r.line), [1, 2, 6]);
});

test('CSV: read a few characters at a time, or in pieces through contacts, a file reads the same as in one go', async (t) => {
  const text = '\uFEFFemail,note,plan\r\n"a@x.org","one ""two""\r\nthree",\r\n\r\nb@x.org, "x, y" ,pro\nc@x.org,"",\r"never closed';
  const whole = parseCsv(text);
  for (const chars of [1, 2, 7]) {
    const cursor = csvCursor(text);
    const records = [];
    while (!cursor.done) records.push(...cursor.read(chars));
    t.deepEqual({ records, error: cursor.error }, whole);
  }
  // Records cross the pieces readContactsCsv reads in: a quoted field with line breaks among them.
  const rows = Array.from({ length: 3 * Math.ceil(CSV_PIECE_CHARS / 40) }, (_, i) => `r${i}@example.org,"line ${i}\nand ""${i}"", more",${i % 3 ? 'yes' : ''}`);
  const big = `email,note,subscribed\n${rows.join('\r\n')}`;
  const read = await readContactsCsv(big);
  t.deepEqual(read, contactsFromCsv(big));
  t.is(read.length, rows.length);
  t.deepEqual(read[rows.length - 1], { line: 2 * rows.length, email: `r${rows.length - 1}@example.org`, body: { email: `r${rows.length - 1}@example.org`, subscribed: true, properties: { note: `line ${rows.length - 1}\nand "${rows.length - 1}", more` } } });
  await t.throwsAsync(readContactsCsv('name\nx\n'), { message: /one of them must be email/ });
});

test('CSV to contacts: empty header names at the end (a trailing ",") are ignored columns, which a row may leave out', (t) => {
  const rows = contactsFromCsv('email,name,\na@x.org,Ann,\nb@x.org,Bo\nc@x.org,Cy,\n');
  t.deepEqual(rows, [
    { line: 2, email: 'a@x.org', body: { email: 'a@x.org', properties: { name: 'Ann' } } },
    { line: 3, email: 'b@x.org', body: { email: 'b@x.org', properties: { name: 'Bo' } } },
    { line: 4, email: 'c@x.org', body: { email: 'c@x.org', properties: { name: 'Cy' } } },
  ]);
  t.like(contactsFromCsv('email,name,,\na@x.org,Ann,,\n')[0], { body: { email: 'a@x.org', properties: { name: 'Ann' } } });
  // An empty name between named columns is still a mistake in the header.
  t.throws(() => contactsFromCsv('email,,name\n'), { message: /column 2 \(""\) is neither/ });
});

test('CSV to contacts: known columns by their usual names, the rest as properties; each bad row says why; a bad header refuses the file', (t) => {
  const rows = contactsFromCsv('E-mail,First Name,surname,Subscribed,plan\nA@Example.org,Ann,Lee,yes,pro\nb@example.org,,,no,\nc@example.org,Cy\nd@example.org,D,E,perhaps,x\n');
  t.deepEqual(rows[0], { line: 2, email: 'A@Example.org', body: { email: 'A@Example.org', firstName: 'Ann', lastName: 'Lee', subscribed: true, properties: { plan: 'pro' } } });
  t.deepEqual(rows[1], { line: 3, email: 'b@example.org', body: { email: 'b@example.org', subscribed: false } });
  t.deepEqual(rows[2], { line: 4, email: 'c@example.org', error: 'has 2 fields where the header has 5' });
  t.deepEqual(rows[3], { line: 5, email: 'd@example.org', error: 'subscribed: "perhaps" is not true/false, yes/no or 1/0' });
  t.throws(() => contactsFromCsv('name,plan\nx,y\n'), { message: /one of them must be email/ });
  t.throws(() => contactsFromCsv('email,bad column!\n'), { message: /column 2 \("bad column!"\) is neither/ });
  t.throws(() => contactsFromCsv('email,Email\n'), { message: /column email appears twice/ });
  t.throws(() => contactsFromCsv(''), { message: /is empty/ });
});

test('CSV to contacts: a row of empty cells (a spreadsheet saves the rows it once formatted as ",,,") is no row, not a refused one', (t) => {
  const rows = contactsFromCsv('email,firstName,plan\r\na@example.org,Ann,pro\r\n,,\r\n , ,\r\nb@example.org,,\r\n,,\r\n,,\r\n');
  t.deepEqual(rows, [
    { line: 2, email: 'a@example.org', body: { email: 'a@example.org', firstName: 'Ann', properties: { plan: 'pro' } } },
    { line: 5, email: 'b@example.org', body: { email: 'b@example.org' } },
  ]);
});

test('CSV export: every property a column, formulas defused, and it reads back as the same contacts', (t) => {
  const contacts: ContactView[] = [
    { id: 'ct_1', email: 'a@example.org', firstName: '=HYPERLINK("x")', lastName: 'O"Neil, Jr', subscribed: true, unsubscribeReason: null, properties: { plan: 'pro' }, contactBookId: 'cb', createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '' },
    { id: 'ct_2', email: 'b@example.org', firstName: null, lastName: null, subscribed: false, unsubscribeReason: 'UNSUBSCRIBED' as const, properties: { city: 'Oslo' }, contactBookId: 'cb', createdAt: '2026-01-02T00:00:00.000Z', updatedAt: '' },
    // A local part may begin with "-" or "+", a phone number with "+", a balance with "-"; and a
    // value may itself begin with the apostrophe the export puts before a formula.
    { id: 'ct_3', email: '-jo@example.org', firstName: "'=not a formula", lastName: '@home', subscribed: true, unsubscribeReason: null, properties: { city: "''+x", phone: '+49 30 1234', plan: '-5' }, contactBookId: 'cb', createdAt: '2026-01-03T00:00:00.000Z', updatedAt: '' },
  ];
  const csv = contactsCsvHeader(['city', 'phone', 'plan']) + contactsCsvLines(contacts, ['city', 'phone', 'plan']);
  t.is(csv.split('\r\n')[0], 'email,firstName,lastName,subscribed,unsubscribeReason,createdAt,city,phone,plan');
  t.true(csv.includes(`'=HYPERLINK(""x"")`));
  t.true(csv.includes(`'-jo@example.org,''=not a formula,'@home,`));
  t.true(csv.includes(`,'''+x,'+49 30 1234,'-5`));
  const back = contactsFromCsv(csv);
  t.deepEqual(back.map((r) => ('body' in r ? r.body : r)), [
    { email: 'a@example.org', firstName: '=HYPERLINK("x")', lastName: 'O"Neil, Jr', subscribed: true, properties: { plan: 'pro' } },
    { email: 'b@example.org', subscribed: false, properties: { city: 'Oslo' } },
    { email: '-jo@example.org', firstName: "'=not a formula", lastName: '@home', subscribed: true, properties: { city: "''+x", phone: '+49 30 1234', plan: '-5' } },
  ]);
  t.is(back[2]!.email, '-jo@example.org', 'a refused row names the address as written');
  // A property key may begin with "-" too: its header cell is defused and read back as the key.
  const keyed = contactsCsvHeader(['-note']) + contactsCsvLines([{ ...contacts[1]!, properties: { '-note': 'x' } }], ['-note']);
  t.like(contactsFromCsv(keyed)[0], { body: { email: 'b@example.org', subscribed: false, properties: { '-note': 'x' } } });
});

test('an import a stopped process left half done carries on at the next start, and nobody is added twice', async (t) => {
  const dataDir = tempDir(t, 'posthorn-import-');
  const rows = 25 * IMPORT_CHUNK_ROWS;
  const csv = `email,plan\n${Array.from({ length: rows }, (_, i) => `p${i}@example.org,${i % 2 ? 'a' : 'b'}`).join('\n')}\n`;
  let app = await startTestApp({ dataDir });
  const scope = { teamId: app.teamId, domainId: null };
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Big' } })).body;
  const job = await app.app.services.contactImports.start(scope, book.id, 'big.csv', csv);
  // Stopping records the chunk in progress and leaves the rest for the next start.
  await app.app.services.contactImports.stop();
  const stopped = await app.app.services.contactImports.get(scope, job.id);
  t.is(stopped.status, 'RUNNING');
  t.true(stopped.processedRows < rows);
  await app.stop();
  app = await startTestApp({ dataDir });
  await app.app.services.contactImports.whenFinished(job.id);
  const done = await app.app.services.contactImports.get(scope, job.id);
  t.is(done.status, 'DONE');
  t.is(done.processedRows, rows);
  t.is(done.created + done.updated, rows);
  t.is(done.errorCount, 0);
  const count = (await app.app.services.contacts.search(scope, book.id, { offset: 0, limit: 1 })).total;
  t.is(count, rows);
  await app.close();
});

test('an import whose progress could not be recorded (the store failed for a moment) carries on by itself, and counts that chunk once: it commits with its progress or not at all', async (t) => {
  // As a process killed between a chunk and its progress record: the chunk runs again, and its
  // contacts must still count as created, not as updated by the run that wrote them first.
  const app = await startTestApp();
  t.teardown(() => app.close());
  const scope = { teamId: app.teamId, domainId: null };
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Counted once' } })).body;
  const repo = createContactImportsRepository(app.app.store.db);
  let failures = 1;
  const storeFailure = () => Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' });
  const imports: typeof repo = {
    ...repo,
    async record(id, owner, changes) {
      if (failures > 0 && changes.processed_rows) {
        failures--;
        throw storeFailure();
      }
      return repo.record(id, owner, changes);
    },
    // The chunk's progress is written inside the chunk's transaction: failing there fails both.
    recordInOpenTransaction(id, owner, changes) {
      if (failures > 0 && changes.processed_rows) {
        failures--;
        throw storeFailure();
      }
      repo.recordInOpenTransaction(id, owner, changes);
    },
  };
  const service = createContactImportService({ imports, contacts: app.app.services.contacts, clock: app.app.clock, logger: pino({ level: 'silent' }), node: 'n', cluster: false, retryDelayMs: 10 });
  t.teardown(() => service.stop());
  const rows = 3 * IMPORT_CHUNK_ROWS;
  const csv = `email\n${Array.from({ length: rows }, (_, i) => `c${i}@example.org`).join('\n')}\n`;
  const job = await service.start(scope, book.id, 'counted.csv', csv);
  await service.whenFinished(job.id);
  t.is(failures, 0, 'the progress write failed once');
  t.like(await service.get(scope, job.id), { status: 'DONE', processedRows: rows, created: rows, updated: 0, errorCount: 0 });
  t.is((await app.app.services.contacts.search(scope, book.id, { offset: 0, limit: 1 })).total, rows);
});

test('an import whose chunk the store could not take for a moment is not FAILED: it carries on from that chunk', async (t) => {
  const app = await startTestApp();
  t.teardown(() => app.close());
  const scope = { teamId: app.teamId, domainId: null };
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Busy store' } })).body;
  const real = app.app.services.contacts;
  let failures = 1;
  const contacts: typeof real = {
    ...real,
    async bulkAdd(...args: Parameters<typeof real.bulkAdd>) {
      if (failures > 0) {
        failures--;
        throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
      }
      return real.bulkAdd(...args);
    },
  };
  const service = createContactImportService({ imports: createContactImportsRepository(app.app.store.db), contacts, clock: app.app.clock, logger: pino({ level: 'silent' }), node: 'n', cluster: false, retryDelayMs: 10 });
  t.teardown(() => service.stop());
  const rows = 2 * IMPORT_CHUNK_ROWS;
  const csv = `email\n${Array.from({ length: rows }, (_, i) => `b${i}@example.org`).join('\n')}\n`;
  const job = await service.start(scope, book.id, 'busy.csv', csv);
  await service.whenFinished(job.id);
  t.like(await service.get(scope, job.id), { status: 'DONE', processedRows: rows, created: rows, errorCount: 0, failure: null });
  t.is((await real.search(scope, book.id, { offset: 0, limit: 1 })).total, rows);
});

test('a node whose import was taken over (it was taken for dead) stops, and writes nothing over the node that runs it now', async (t) => {
  const app = await startTestApp();
  t.teardown(() => app.close());
  const scope = { teamId: app.teamId, domainId: null };
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Taken over' } })).body;
  const db = app.app.store.db;
  const real = app.app.services.contacts;
  let takenOver = false;
  const contacts: typeof real = {
    ...real,
    // While its first chunk is stored, the node is found dead and another takes the import.
    async bulkAdd(...args: Parameters<typeof real.bulkAdd>) {
      if (!takenOver) {
        takenOver = true;
        await db.updateTable('contact_imports').set({ owner: 'node-b' }).where('owner', '=', 'node-a').execute();
      }
      return real.bulkAdd(...args);
    },
  };
  const logged: { level: number; msg: string }[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void logged.push(JSON.parse(line) as { level: number; msg: string }) });
  const service = createContactImportService({ imports: createContactImportsRepository(db), contacts, clock: app.app.clock, logger, node: 'node-a', cluster: true });
  t.teardown(() => service.stop());
  const rows = 3 * IMPORT_CHUNK_ROWS;
  const csv = `email\n${Array.from({ length: rows }, (_, i) => `t${i}@example.org`).join('\n')}\n`;
  const job = await service.start(scope, book.id, 'taken.csv', csv);
  await service.whenFinished(job.id);
  const row = await db.selectFrom('contact_imports').selectAll().where('id', '=', job.id).executeTakeFirstOrThrow();
  t.like(row, { owner: 'node-b', status: 'RUNNING', processed_rows: 0 }, 'left to node-b as node-b found it');
  t.is((await db.selectFrom('contact_import_files').select('content').where('import_id', '=', job.id).executeTakeFirst())?.content, csv, 'its file is still there for node-b to run');
  // Its chunk rolled back with the progress it could not record: node-b counts those rows as its own.
  t.is((await real.search(scope, book.id, { offset: 0, limit: 1 })).total, 0, 'the chunk of the node that lost the import is not written');
  t.deepEqual(logged.map((l) => l.msg), ['contact import stopped here: another node runs it now (this one was taken for dead), or it ended meanwhile'], 'it stopped for the lost import, not as a failure');
});

test('an import that fails after a chunk committed (in an after-commit step) is FAILED with that chunk counted; one that fails before, without it', async (t) => {
  const app = await startTestApp();
  t.teardown(() => app.close());
  const scope = { teamId: app.teamId, domainId: null };
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Fails late' } })).body;
  const real = app.app.services.contacts;
  const run = async (failAt: number, afterCommit: boolean) => {
    let call = 0;
    const contacts: typeof real = {
      ...real,
      async bulkAdd(...args: Parameters<typeof real.bulkAdd>) {
        if (++call === failAt && !afterCommit) throw new AppError('BAD_REQUEST', 'refused before');
        const result = await real.bulkAdd(...args);
        if (call === failAt) throw new AppError('BAD_REQUEST', 'refused after');
        return result;
      },
    };
    const service = createContactImportService({ imports: createContactImportsRepository(app.app.store.db), contacts, clock: app.app.clock, logger: pino({ level: 'silent' }), node: 'n', cluster: false });
    t.teardown(() => service.stop());
    const rows = 3 * IMPORT_CHUNK_ROWS;
    const csv = `email\n${Array.from({ length: rows }, (_, i) => `f${afterCommit ? 'a' : 'b'}${i}@example.org`).join('\n')}\n`;
    const job = await service.start(scope, book.id, 'fails.csv', csv);
    await service.whenFinished(job.id);
    t.is(await createContactImportsRepository(app.app.store.db).readFile(scope.teamId, job.id), undefined, 'a failed import keeps its report, not its file');
    return service.get(scope, job.id);
  };
  t.like(await run(2, true), { status: 'FAILED', failure: 'refused after', processedRows: 2 * IMPORT_CHUNK_ROWS, created: 2 * IMPORT_CHUNK_ROWS });
  t.like(await run(2, false), { status: 'FAILED', failure: 'refused before', processedRows: IMPORT_CHUNK_ROWS, created: IMPORT_CHUNK_ROWS });
});

test('the file is stored once, apart from the progress row each chunk rewrites, and gone when the import is done', async (t) => {
  const app = await startTestApp();
  t.teardown(() => app.close());
  const scope = { teamId: app.teamId, domainId: null };
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Apart' } })).body;
  const db = app.app.store.db;
  const repo = createContactImportsRepository(db);
  const real = app.app.services.contacts;
  const rows = 3 * IMPORT_CHUNK_ROWS;
  // Long rows, so the file outweighs anything a progress row holds.
  const csv = `email,notes\n${Array.from({ length: rows }, (_, i) => `apart${i}@example.org,${'n'.repeat(200)}`).join('\n')}\n`;
  const seen: { rowChars: number; file: string | undefined }[] = [];
  const contacts: typeof real = {
    ...real,
    // Before each chunk: the import's row as the last progress update left it, and its file.
    async bulkAdd(...args: Parameters<typeof real.bulkAdd>) {
      const row = await db.selectFrom('contact_imports').selectAll().where('contact_book_id', '=', book.id).executeTakeFirstOrThrow();
      seen.push({ rowChars: JSON.stringify(row).length, file: await repo.readFile(scope.teamId, row.id) });
      return real.bulkAdd(...args);
    },
  };
  const service = createContactImportService({ imports: repo, contacts, clock: app.app.clock, logger: pino({ level: 'silent' }), node: 'n', cluster: false });
  t.teardown(() => service.stop());
  const job = await service.start(scope, book.id, 'apart.csv', csv);
  await service.whenFinished(job.id);
  t.like(await service.get(scope, job.id), { status: 'DONE', processedRows: rows, created: rows });
  t.is(seen.length, 3);
  for (const s of seen) {
    t.is(s.file, csv, 'the running import has its whole file');
    t.true(s.rowChars < 2000, `the progress row holds ${s.rowChars} characters, not the ${csv.length} of the file`);
  }
  t.is(await repo.readFile(scope.teamId, job.id), undefined, 'the done import kept no file');
  t.deepEqual(await db.selectFrom('contact_import_files').select('import_id').execute(), []);
});

test('a running import whose file is not stored fails, saying so, instead of holding one of its team\'s running slots', async (t) => {
  const app = await startTestApp();
  t.teardown(() => app.close());
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'No file' } })).body;
  const db = app.app.store.db;
  const now = app.app.clock.now().toISOString();
  await db
    .insertInto('contact_imports')
    .values({ id: 'ci_nofile', team_id: app.teamId, contact_book_id: book.id, file_name: 'gone.csv', status: 'RUNNING', total_rows: 5, processed_rows: 0, created_count: 0, updated_count: 0, error_count: 0, errors_json: '[]', failure: null, created_at: now, updated_at: now, owner: null })
    .execute();
  const service = createContactImportService({ imports: createContactImportsRepository(db), contacts: app.app.services.contacts, clock: app.app.clock, logger: pino({ level: 'silent' }), node: 'n', cluster: false });
  t.teardown(() => service.stop());
  t.is(await service.resume(), 1);
  await service.whenFinished('ci_nofile');
  t.like(await service.get({ teamId: app.teamId, domainId: null }, 'ci_nofile'), { status: 'FAILED', failure: 'the uploaded file is no longer stored; import it again', processedRows: 0 });
});

test('a running import\'s file is read by its team only', async (t) => {
  const app = await startTestApp();
  t.teardown(() => app.close());
  const { a, b } = await twoTeams(app);
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Theirs' } })).body;
  const { contacts, release } = heldContacts(app.app.services.contacts);
  const repo = createContactImportsRepository(app.app.store.db);
  const service = createContactImportService({ imports: repo, contacts, clock: app.app.clock, logger: pino({ level: 'silent' }), node: 'n', cluster: false });
  t.teardown(async () => {
    release();
    await service.stop();
  });
  const job = await service.start({ teamId: a.teamId, domainId: null }, book.id, 'theirs.csv', 'email\nwalled@example.org\n');
  t.is(await repo.readFile(a.teamId, job.id), 'email\nwalled@example.org\n');
  t.is(await repo.readFile(b.teamId, job.id), undefined, 'another team\'s key reads nothing');
  release();
  await service.whenFinished(job.id);
  t.is(await repo.readFile(a.teamId, job.id), undefined);
});

test('a team runs at most MAX_RUNNING_IMPORTS imports at once: the next is RATE_LIMITED until one ends; other teams are not held back', async (t) => {
  const app = await startTestApp();
  t.teardown(() => app.close());
  const scope = { teamId: app.teamId, domainId: null };
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Many files' } })).body;
  // Every import waits inside its first chunk until released, so they all stay RUNNING.
  const { contacts, release } = heldContacts(app.app.services.contacts);
  const service = createContactImportService({ imports: createContactImportsRepository(app.app.store.db), contacts, clock: app.app.clock, logger: pino({ level: 'silent' }), node: 'n', cluster: false });
  t.teardown(async () => {
    release();
    await service.stop();
  });
  const csv = (tag: string) => `email\n${tag}@example.org\n`;
  const started = [];
  for (let i = 0; i < MAX_RUNNING_IMPORTS; i++) started.push(await service.start(scope, book.id, `f${i}.csv`, csv(`f${i}`)));
  const refused = await service.start(scope, book.id, 'one-more.csv', csv('more')).then(() => null, (err: unknown) => err);
  t.like(refused, { code: 'RATE_LIMITED' });
  t.regex((refused as Error).message, new RegExp(`${MAX_RUNNING_IMPORTS} imports are running`));
  t.is((await service.listForBook(scope, book.id, 20)).length, MAX_RUNNING_IMPORTS, 'the refused file was not stored');

  // Another team's import is not held back by this team's.
  const { b } = await twoTeams(app);
  const otherScope = { teamId: b.teamId, domainId: null };
  const otherBook = await app.app.services.contactBooks.create(otherScope, { name: 'Theirs' });
  t.is((await service.start(otherScope, otherBook.id, 'theirs.csv', csv('theirs'))).status, 'RUNNING');

  // Once they end, the team may start again.
  release();
  for (const job of started) await service.whenFinished(job.id);
  const next = await service.start(scope, book.id, 'later.csv', csv('later'));
  await service.whenFinished(next.id);
  t.is((await service.get(scope, next.id)).status, 'DONE');
});

test('while a large file is read for its import, the server answers other requests (the file is read a piece at a time)', async (t) => {
  const app = await startTestApp();
  t.teardown(() => app.close());
  const scope = { teamId: app.teamId, domainId: null };
  const book = (await app.request('POST', '/v1/contactBooks', { body: { name: 'Large file' } })).body;
  const real = app.app.services.contacts;
  // start() looks up the book once the file is read: until then, it is being read.
  let read = false;
  const contacts: typeof real = {
    ...real,
    async search(...args: Parameters<typeof real.search>) {
      read = true;
      return real.search(...args);
    },
  };
  const service = createContactImportService({ imports: createContactImportsRepository(app.app.store.db), contacts, clock: app.app.clock, logger: pino({ level: 'silent' }), node: 'n', cluster: false });
  t.teardown(() => service.stop());
  const csv = `email,firstName,lastName,note\n${Array.from({ length: 100_000 }, (_, i) => `big${i}@example.org,"Ann, ""A""",Lee,"a note\nof two lines"`).join('\n')}\n`;
  // The request is on its way before the reading starts; read in one go, it would wait for all of it.
  const health = app.request('GET', '/health').then((res) => ({ status: res.status, whileReading: !read }));
  const started = service.start(scope, book.id, 'large.csv', csv);
  t.deepEqual(await health, { status: 200, whileReading: true });
  const job = await started;
  t.is(job.totalRows, 100_000);
  await service.stop();
});
