// The spec's page-numbered lists: page (default 1), limit (default 25, at most 100), and the
// envelope {<resource>: [...], page, limit, total, totalPage, hasMore}. The parameters are
// declared with pageQueries() (params.ts); the envelope's schema is pageEnvelopeSchema
// (schemas/common-schemas.ts).
import { pageQueries, parseParams } from './params.js';

export interface PageRequest {
  page: number;
  limit: number;
  offset: number;
}

/** The offset of a parsed page/limit pair. */
export function pageOf(q: { page: number; limit: number }): PageRequest {
  return { page: q.page, limit: q.limit, offset: (q.page - 1) * q.limit };
}

/** Parses page and limit from a raw query with the declared parameters (for callers outside a route). */
export function parsePage(query: Record<string, string | string[] | undefined>, opts: { defaultLimit?: number; maxLimit?: number } = {}): PageRequest {
  return pageOf(parseParams(pageQueries(opts.defaultLimit, opts.maxLimit), (name) => query[name]));
}

export function pageEnvelope<K extends string, T>(key: K, items: T[], total: number, req: PageRequest) {
  const totalPage = Math.ceil(total / req.limit);
  return {
    [key]: items,
    page: req.page,
    limit: req.limit,
    total,
    totalPage,
    hasMore: req.page < totalPage,
  } as { [P in K]: T[] } & { page: number; limit: number; total: number; totalPage: number; hasMore: boolean };
}
