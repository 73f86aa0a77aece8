import { contactBookCreateSchema, contactBookPatchSchema, type BookScope, type ContactBookService } from '../../core/contacts/contact-book-service.js';
import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import { z } from 'zod';
import { stringPath } from '../params.js';
import { defineRoute, type RouteDef } from '../route-types.js';
import { deletedSchema } from '../schemas/common-schemas.js';
import { contactBookSchema } from '../schemas/contact-schemas.js';

export function bookScope(auth: AuthContext): BookScope {
  return { teamId: auth.teamId, domainId: auth.domainId };
}

/** String path ids (cb_, ct_, sg_): bounded so a huge path never reaches the store. */
export const contactBookIdParam = stringPath('Contact book id.');

export function contactBooksRoutes(books: ContactBookService): RouteDef[] {
  const tag = 'Contact books';
  const params = { contactBookId: contactBookIdParam };
  return [
    defineRoute({
      method: 'GET',
      path: '/contactBooks',
      access: 'full',
      tag,
      summary: 'List contact books with their contact counts (a bare array).',
      response: z.array(contactBookSchema),
      handler: async ({ auth }) => books.list(bookScope(auth)),
    }),
    defineRoute({
      method: 'POST',
      path: '/contactBooks',
      access: 'full',
      tag,
      summary: 'Create a contact book.',
      request: { body: contactBookCreateSchema },
      response: contactBookSchema,
      handler: async ({ auth, input }) => books.create(bookScope(auth), input.body),
    }),
    defineRoute({
      method: 'GET',
      path: '/contactBooks/:contactBookId',
      access: 'full',
      tag,
      summary: 'Get a contact book.',
      request: { params },
      response: contactBookSchema,
      errors: [404],
      handler: async ({ auth, input }) => books.get(bookScope(auth), input.params.contactBookId),
    }),
    defineRoute({
      method: 'PATCH',
      path: '/contactBooks/:contactBookId',
      access: 'full',
      tag,
      summary: 'Change a contact book (name, emoji, properties, variables, double opt-in).',
      request: { params, body: contactBookPatchSchema },
      response: contactBookSchema,
      errors: [404],
      handler: async ({ auth, input }) => books.update(bookScope(auth), input.params.contactBookId, input.body),
    }),
    defineRoute({
      method: 'DELETE',
      path: '/contactBooks/:contactBookId',
      access: 'full',
      tag,
      summary: 'Delete a contact book with its contacts and segments; 409 while a scheduled, running or paused campaign sends to it.',
      request: { params },
      response: deletedSchema(z.string()),
      errors: [404, 409],
      handler: async ({ auth, input }) => books.remove(bookScope(auth), input.params.contactBookId),
    }),
  ];
}
