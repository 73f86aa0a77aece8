import { escapeHtml } from '../render/html-escape.js';

// The console's one way to write HTML: a tagged template that escapes every interpolated
// value unless it is already SafeHtml (made by this tag). Nothing user-supplied can reach a
// page unescaped without a visible `trustedHtml(...)`, and there is none for user data.

export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export type HtmlValue = SafeHtml | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(v: HtmlValue): string {
  if (v === null || v === undefined || v === false) return '';
  if (v instanceof SafeHtml) return v.value;
  if (Array.isArray(v)) return v.map(render).join('');
  return escapeHtml(String(v));
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new SafeHtml(out);
}

/** Markup the console itself produced (SVG charts, static fragments); never user data. */
export function trustedHtml(markup: string): SafeHtml {
  return new SafeHtml(markup);
}

export function joinHtml(parts: readonly HtmlValue[], separator: HtmlValue = ''): SafeHtml {
  return new SafeHtml(parts.map(render).join(render(separator)));
}

/** `?a=1&b=2` from the defined, non-empty entries; values repeat for arrays. */
export function queryString(params: Record<string, string | number | undefined | null | readonly string[]>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    for (const item of Array.isArray(v) ? v : [v]) q.append(k, String(item));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** A path segment from an id: ids are ours, but are encoded anyway. */
export const seg = (v: string | number) => encodeURIComponent(String(v));
