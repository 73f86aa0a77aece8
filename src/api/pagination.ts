import { badRequest } from '../core/errors.js';

// The spec's page-numbered lists: page (default 1), limit (default 25, at most 100), and the
// envelope {<resource>: [...], page, limit, total, totalPage, hasMore}.

export interface PageRequest {
  page: number;
  limit: number;
  offset: number;
}

export function parsePage(
  query: Record<string, string | string[] | undefined>,
  opts: { defaultLimit?: number; maxLimit?: number } = {},
): PageRequest {
  const defaultLimit = opts.defaultLimit ?? 25;
  const maxLimit = opts.maxLimit ?? 100;
  const page = positiveInt(query.page, 'page', 1);
  const limit = positiveInt(query.limit, 'limit', defaultLimit);
  if (limit > maxLimit) throw badRequest(`limit: must be at most ${maxLimit}`);
  if (page > 1_000_000_000) throw badRequest('page: too large');
  return { page, limit, offset: (page - 1) * limit };
}

function positiveInt(raw: string | string[] | undefined, name: string, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  if (Array.isArray(raw)) throw badRequest(`${name}: must be given once`);
  if (!/^\d{1,10}$/.test(raw) || Number(raw) < 1) throw badRequest(`${name}: must be a positive integer`);
  return Number(raw);
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
