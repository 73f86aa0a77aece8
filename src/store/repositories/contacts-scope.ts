import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../tables/database.js';
import { contactFilterExpression, type FilterNode } from './contact-filter-sql.js';
import { storeKindOf } from '../store-context.js';

/** The one team and book a filtered contact query may read. */
export interface BookKey {
  teamId: number;
  bookId: string;
}

/**
 * The only way to select contacts by a segment filter: the team, the book and the filter are
 * one AND of parenthesised operands, so no filter can reach a row outside its book, whatever
 * ORs it holds. The team is checked as well as the book (a book belongs to one team, but a
 * second wall costs nothing and does not depend on that invariant).
 */
export function contactsInBook(db: Kysely<Database> | Transaction<Database>, scope: BookKey, filter?: FilterNode | null) {
  return db
    .selectFrom('contacts')
    .where((eb) =>
      eb.and([
        eb('contacts.team_id', '=', scope.teamId),
        eb('contacts.contact_book_id', '=', scope.bookId),
        ...(filter ? [contactFilterExpression(eb, filter, storeKindOf(db))] : []),
      ]),
    );
}
