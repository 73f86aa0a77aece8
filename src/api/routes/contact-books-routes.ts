import { contactBookCreateSchema, contactBookPatchSchema, type BookScope, type ContactBookService } from '../../core/contacts/contact-book-service.js';
import type { AuthContext } from '../../core/api-keys/api-key-service.js';
import { badRequest } from '../../core/errors.js';
import type { RouteDef, RouteRequest } from '../route-types.js';
import { parseInput } from '../validation.js';

export function bookScope(auth: AuthContext): BookScope {
  return { teamId: auth.teamId, domainId: auth.domainId };
}

/** String path ids (cb_, ct_, sg_): bounded so a huge path never reaches the store. */
export function pathId(req: RouteRequest, name: string): string {
  const id = req.params[name] ?? '';
  if (id.length < 1 || id.length > 100) throw badRequest(`${name}: must be 1 to 100 characters`);
  return id;
}

export function contactBooksRoutes(books: ContactBookService): RouteDef[] {
  return [
    {
      method: 'GET',
      path: '/contactBooks',
      access: 'full',
      summary: 'List contact books with their contact counts (a bare array).',
      handler: async ({ auth }) => books.list(bookScope(auth)),
    },
    {
      method: 'POST',
      path: '/contactBooks',
      access: 'full',
      summary: 'Create a contact book.',
      handler: async ({ auth, body }) => books.create(bookScope(auth), parseInput(contactBookCreateSchema, body ?? {})),
    },
    {
      method: 'GET',
      path: '/contactBooks/:contactBookId',
      access: 'full',
      summary: 'Get a contact book.',
      handler: async (req) => books.get(bookScope(req.auth), pathId(req, 'contactBookId')),
    },
    {
      method: 'PATCH',
      path: '/contactBooks/:contactBookId',
      access: 'full',
      summary: 'Change a contact book (name, emoji, properties, variables, double opt-in).',
      handler: async (req) => {
        const id = pathId(req, 'contactBookId');
        return books.update(bookScope(req.auth), id, parseInput(contactBookPatchSchema, req.body ?? {}));
      },
    },
    {
      method: 'DELETE',
      path: '/contactBooks/:contactBookId',
      access: 'full',
      summary: 'Delete a contact book with its contacts and segments.',
      handler: async (req) => books.remove(bookScope(req.auth), pathId(req, 'contactBookId')),
    },
  ];
}
