// A list page's query string, read one filter at a time. A value that is no valid filter is
// left out (the list is shown without it) and named in `problems`, which the page shows above
// the list with status 400 (renderPage's `problems`): a link with a typo must not quietly show
// another list than the one asked for. Parameters a page does not read are not looked at.

/** The last page a list goes to. */
const MAX_PAGE = 100_000;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

export class ListQuery {
  readonly problems: string[] = [];
  private readonly q: URLSearchParams;

  constructor(querystring: string) {
    this.q = new URLSearchParams(querystring);
  }

  /** A parameter as given ('' when absent), for what is not a filter. */
  raw(name: string): string {
    return this.q.get(name) ?? '';
  }

  /** Free text, trimmed ('' when absent); longer than `max` characters, it is left out. */
  text(name: string, label: string, max = Infinity): string {
    const value = this.raw(name).trim();
    if ([...value].length <= max) return value;
    this.problems.push(`${label}: at most ${max} characters; the list is not filtered by it.`);
    return '';
  }

  /** One of `values` (its case aside), or undefined when absent or no such value. */
  oneOf<T extends string>(name: string, label: string, values: readonly T[]): T | undefined {
    const value = this.raw(name);
    if (!value) return undefined;
    const found = values.find((v) => v.toLowerCase() === value.toLowerCase());
    if (found === undefined) this.problems.push(`${label}: "${value}" is not one of ${values.map((v) => v.toLowerCase()).join(', ')}; the list is not filtered by it.`);
    return found;
  }

  /** A calendar date YYYY-MM-DD that exists ('' when absent or not one). */
  date(name: string, label: string): string {
    const value = this.raw(name);
    if (!value) return '';
    const day = DATE.test(value) ? new Date(`${value}T00:00:00.000Z`) : undefined;
    if (day && !Number.isNaN(day.getTime()) && day.toISOString().startsWith(value)) return value;
    this.problems.push(`${label}: "${value}" is not a date (YYYY-MM-DD); the list is not filtered by it.`);
    return '';
  }

  /** The id of one of `known` (the team's own), as given; '' when absent or no such id. */
  idOf(name: string, label: string, known: readonly { id: number | string }[]): string {
    const value = this.raw(name);
    if (!value) return '';
    if (known.some((k) => String(k.id) === value)) return value;
    this.problems.push(`${label}: there is no ${label.toLowerCase()} with the id "${value}"; the list is not filtered by it.`);
    return '';
  }

  /** The page asked for, 1 to MAX_PAGE (1 when absent or not a page number). */
  page(limit = 25): { page: number; limit: number; offset: number } {
    const value = this.raw('page');
    let page = 1;
    if (value) {
      const n = /^\d{1,6}$/.test(value) ? Number(value) : NaN;
      if (n >= 1 && n <= MAX_PAGE) page = n;
      else this.problems.push(`Page: "${value}" is not a page number (1 to ${MAX_PAGE}); showing page 1.`);
    }
    return { page, limit, offset: (page - 1) * limit };
  }
}
