import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new one.
// Audience: contact books, their contacts, and segments (saved filters over a book).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('contact_books')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('emoji', 'text', (c) => c.notNull())
    .addColumn('properties_json', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('variables_json', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('double_opt_in_enabled', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('double_opt_in_from', 'text')
    .addColumn('double_opt_in_subject', 'text')
    .addColumn('double_opt_in_content', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('contact_books_team_created').on('contact_books').columns(['team_id', 'created_at']).execute();

  await db.schema
    .createTable('contacts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('team_id', 'integer', (c) => c.notNull())
    .addColumn('contact_book_id', 'text', (c) => c.notNull().references('contact_books.id').onDelete('cascade'))
    // Trimmed and lowercased (the same key suppressions use), so one address is one contact.
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('first_name', 'text')
    .addColumn('last_name', 'text')
    .addColumn('subscribed', 'integer', (c) => c.notNull().defaultTo(1))
    // Set when the person (or a bounce/complaint) unsubscribed them. subscribed = 0 with no
    // reason is a double opt-in contact still pending confirmation.
    .addColumn('unsubscribe_reason', 'text')
    .addColumn('properties_json', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('contacts_book_email').on('contacts').columns(['contact_book_id', 'email']).unique().execute();
  await db.schema.createIndex('contacts_book_created').on('contacts').columns(['contact_book_id', 'created_at']).execute();
  // Bounces, complaints and unsubscribes look an address up across the team's books.
  await db.schema.createIndex('contacts_team_email').on('contacts').columns(['team_id', 'email']).execute();

  await db.schema
    .createTable('segments')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('contact_book_id', 'text', (c) => c.notNull().references('contact_books.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('filters_json', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await sql`create index segments_team_created on segments(team_id, created_at)`.execute(db);
}
