/**
 * Integer ids (domains, API keys, teams, deliveries, template versions) are 32-bit columns: the spec's limit
 * (1 to 2147483647) and PostgreSQL's `integer`. A number outside it names no row; asked of
 * PostgreSQL it is an error, not an empty answer, so core checks it before any query.
 */
export const MAX_INT_ID = 2147483647;

export function isIntId(n: number): boolean {
  return Number.isInteger(n) && n >= 1 && n <= MAX_INT_ID;
}
