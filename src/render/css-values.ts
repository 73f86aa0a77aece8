/*
 * Editor attributes end up inside style="" attributes. Escaping stops them
 * from breaking out of the attribute, but not from adding declarations
 * ("red;background:url(https://tracker)"), so every value is matched against
 * a narrow shape and dropped when it does not fit.
 */

const HEX_COLOR = /^#(?:[0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$/i;
// No parentheses, colons or semicolons inside, so nothing can be smuggled in;
// a single bounded character class keeps the match linear.
const FUNCTION_COLOR = /^(?:rgba?|hsla?)\([0-9a-z.%\s,/+-]{1,80}\)$/i;
const NAMED_COLOR = /^[a-z]{3,20}$/i;

export function safeColor(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const v = value.trim();
  if (HEX_COLOR.test(v) || FUNCTION_COLOR.test(v) || NAMED_COLOR.test(v)) return v;
  return undefined;
}

const FONT_SIZE = /^\d{1,3}(?:\.\d{1,3})?(?:px|pt|em|rem|%)$/;

export function safeFontSize(value: unknown): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value > 0 && value < 1000 ? `${value}px` : undefined;
  if (typeof value !== 'string') return undefined;
  const v = value.trim();
  if (/^\d{1,3}(?:\.\d{1,3})?$/.test(v)) return `${v}px`;
  return FONT_SIZE.test(v) ? v : undefined;
}

const FONT_WEIGHT = /^(?:normal|bold|bolder|lighter|[1-9]00)$/;

export function safeFontWeight(value: unknown): string | undefined {
  const v = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : undefined;
  return v !== undefined && FONT_WEIGHT.test(v) ? v : undefined;
}

/** A pixel length given as 12, "12" or "12px"; undefined for anything else. */
export function toPixels(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const m = /^(\d{1,5}(?:\.\d{1,3})?)(?:px)?$/.exec(value.trim());
  return m ? Number(m[1]) : undefined;
}

/** A percentage given as "50%"; undefined for anything else. */
export function toPercent(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const m = /^(\d{1,3}(?:\.\d{1,2})?)%$/.exec(value.trim());
  return m && Number(m[1]) <= 100 ? Number(m[1]) : undefined;
}
