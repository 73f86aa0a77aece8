import type BetterSqlite3 from 'better-sqlite3';
import { sql, type Expression, type RawBuilder, type SqlBool } from 'kysely';
import type { StoreKind } from './store-context.js';

/*
 * Text lowered for matching that ignores case (segment contains/startsWith/endsWith, the
 * searches), the same way on both engines and for every alphabet: a segment's audience must
 * not depend on the store. Neither engine's own lower() will do: SQLite's folds ASCII only, and
 * PostgreSQL's follows the operand's collation, which for our columns is "C" (pg-schema-plugin.ts),
 * so ASCII only too, while JSON property values take the database's locale.
 *
 * SQLite: a function of ours, JavaScript's toLowerCase() (Unicode's full lowercase mapping,
 * locale-independent). PostgreSQL: lower() under ICU's root collation, the same mapping
 * (final sigma and the dotted capital I included). Then final sigma becomes sigma on both
 * (FINAL_SIGMA below). Use it on both sides of a comparison.
 * Exact lookups (an email, an id) keep comparing as stored, on their indexes.
 */

/**
 * Capital sigma lowers to "ς" at the end of a word and to "σ" elsewhere (both engines), so the
 * start of a word, lowered alone, ended in "ς" and was not found in the word ("ΚΑΣ" in
 * "ΚΑΣΤΡΟΣ"). The one letter whose lowercase depends on its neighbours is folded to one form.
 */
const FINAL_SIGMA = 'ς';
const SIGMA = 'σ';

/** The SQLite function's name. Never used in a schema object (index, view, trigger): other tools opening the file do not have it. */
const SQLITE_LOWER = 'unicode_lower';
/** ICU's root-locale collation, present on every PostgreSQL built with ICU (the Debian, Red Hat, Docker and cloud builds). */
export const PG_LOWER_COLLATION = 'und-x-icu';

/** Registers the function on a SQLite connection (every connection that runs these queries). */
export function registerUnicodeLower(sqlite: BetterSqlite3.Database): void {
  // Deterministic, so SQLite may evaluate it once for a constant. safeIntegers: a number (a JSON
  // property read by json_extract) passes through as the exact value SQLite gave, and LIKE or
  // instr() turn it into text as they would have.
  sqlite.function(SQLITE_LOWER, { deterministic: true, safeIntegers: true }, (value: unknown) => (typeof value === 'string' ? value.toLowerCase().replaceAll(FINAL_SIGMA, SIGMA) : value));
}

/**
 * `value LIKE pattern ESCAPE '\'` with case ignored: both sides lowered. On SQLite a value that
 * is all ASCII (as many bytes as characters) skips our function, whose call costs a few times
 * the LIKE itself on a large book: there SQLite's LIKE, which folds ASCII, already answers the
 * same (the pattern is lowered, and its non-ASCII letters match no ASCII one either way).
 */
export function likeIgnoringCase(kind: StoreKind, value: Expression<unknown>, pattern: string): RawBuilder<SqlBool> {
  const p = unicodeLower(kind, pattern);
  if (kind === 'postgres') return sql<SqlBool>`(${unicodeLower(kind, value)} like ${p} escape '\\')`;
  return sql<SqlBool>`(case when length(${value}) = octet_length(${value}) then ${value} like ${p} escape '\\' else ${unicodeLower(kind, value)} like ${p} escape '\\' end)`;
}

/** `value` lowered for a case-ignoring comparison on this engine. */
export function unicodeLower(kind: StoreKind, value: Expression<unknown> | string): RawBuilder<string> {
  const operand = typeof value === 'string' ? sql.val(value) : value;
  return kind === 'postgres'
    ? sql<string>`replace(lower((${operand}) collate ${sql.id(PG_LOWER_COLLATION)}), ${sql.lit(FINAL_SIGMA)}, ${sql.lit(SIGMA)})`
    : sql<string>`${sql.raw(SQLITE_LOWER)}(${operand})`;
}
