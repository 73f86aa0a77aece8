import { resolvePointer } from './openapi-check.js';

// Is our 200 body usable by code written against usesend's OpenAPI document? The fixture
// (test/proof/fixtures/usesend-operations.json) keeps, per operation, the JSON types of their
// 200 body: property names, required flags, nullability. Ours is compatible when every
// property they require is required in ours, every property they describe that we have has a
// type they allow, and we never answer null where they do not allow it. Enum values are not
// compared: ours may be wider (a CNAME record for tracking domains, CLICKED statuses).

type Json = any;

export interface UsesendShape {
  type?: string;
  nullable?: boolean;
  anyOf?: UsesendShape[];
  properties?: Record<string, UsesendShape & { required: boolean }>;
  additionalProperties?: UsesendShape;
  items?: UsesendShape;
}

/** The JSON types our schema admits, following $ref and anyOf/oneOf; null when unconstrained. */
function ourTypes(doc: Json, s: Json): Set<string> | null {
  if (s.$ref) return ourTypes(doc, resolvePointer(doc, s.$ref));
  const alts = s.anyOf ?? s.oneOf;
  if (alts) {
    const out = new Set<string>();
    for (const a of alts) {
      const t = ourTypes(doc, a);
      if (t === null) return null;
      t.forEach((x) => out.add(x));
    }
    return out;
  }
  if (s.const !== undefined) return new Set([s.const === null ? 'null' : typeof s.const === 'number' ? 'number' : typeof s.const]);
  if (s.type === undefined) return null;
  return new Set(Array.isArray(s.type) ? s.type : [s.type]);
}

/** The branch of our schema of a given JSON type (object or array), following $ref and unions. */
function branch(doc: Json, s: Json, type: 'object' | 'array'): Json | undefined {
  if (s.$ref) return branch(doc, resolvePointer(doc, s.$ref), type);
  for (const a of s.anyOf ?? s.oneOf ?? []) {
    const b = branch(doc, a, type);
    if (b) return b;
  }
  const types = Array.isArray(s.type) ? s.type : [s.type];
  return types.includes(type) ? s : undefined;
}

/** The JSON types their shape admits; null when a branch has no type (OpenAPI 3.0: any value). */
function theirTypes(shape: UsesendShape): Set<string> | null {
  if (!shape.type && !shape.anyOf) return null;
  const out = new Set<string>();
  for (const a of shape.anyOf ?? []) {
    const t = theirTypes(a);
    if (t === null) return null;
    t.forEach((x) => out.add(x));
  }
  if (shape.type) out.add(shape.type);
  if (shape.nullable) out.add('null');
  if (shape.type === 'number') out.add('integer');
  return out;
}

export function incompatibilities(doc: Json, ours: Json, theirs: UsesendShape | null, path = '$'): string[] {
  if (!theirs) return [];
  const problems: string[] = [];
  const allowed = theirTypes(theirs);
  const mine = ourTypes(doc, ours);
  if (allowed !== null) {
    if (mine === null) return [`${path}: unconstrained in ours, ${[...allowed].join('|')} in theirs`];
    for (const t of mine) if (!allowed.has(t)) problems.push(`${path}: ours may be ${t}, theirs allows ${[...allowed].join('|')}`);
  }
  const objects = [theirs, ...(theirs.anyOf ?? [])].filter((s) => s.properties || s.additionalProperties);
  for (const o of objects) {
    const mineObj = branch(doc, ours, 'object');
    if (!mineObj) {
      problems.push(`${path}: theirs is an object, ours is not`);
      continue;
    }
    for (const [name, prop] of Object.entries(o.properties ?? {})) {
      const has = mineObj.properties && name in mineObj.properties;
      if (prop.required && !(has && (mineObj.required ?? []).includes(name))) problems.push(`${path}.${name}: required in theirs, ${has ? 'optional' : 'missing'} in ours`);
      if (has) problems.push(...incompatibilities(doc, mineObj.properties[name], prop, `${path}.${name}`));
    }
    if (o.additionalProperties && mineObj.additionalProperties && typeof mineObj.additionalProperties === 'object') {
      problems.push(...incompatibilities(doc, mineObj.additionalProperties, o.additionalProperties, `${path}.*`));
    }
  }
  const arrays = [theirs, ...(theirs.anyOf ?? [])].filter((s) => s.items);
  for (const a of arrays) {
    const mineArr = branch(doc, ours, 'array');
    if (!mineArr) {
      if (!a.anyOf && theirs.type === 'array') problems.push(`${path}: theirs is an array, ours is not`);
      continue;
    }
    problems.push(...incompatibilities(doc, mineArr.items ?? {}, a.items!, `${path}[]`));
  }
  return problems;
}

/**
 * Does our request schema take every body written to usesend's document? The other direction
 * of incompatibilities(): every property they describe is one of ours (our objects are strict,
 * so a missing one is refused) with at least the JSON types they allow, and every property we
 * require they require too. Bounds and formats are not compared.
 */
export function requestIncompatibilities(doc: Json, ours: Json, theirs: UsesendShape | null, path = '$'): string[] {
  if (!theirs) return [];
  const problems: string[] = [];
  const allowed = theirTypes(theirs);
  const mine = ourTypes(doc, ours);
  if (allowed !== null && mine !== null) {
    for (const t of allowed) if (!mine.has(t) && !(t === 'integer' && mine.has('number'))) problems.push(`${path}: theirs may be ${t}, ours takes ${[...mine].join('|')}`);
  }
  if (allowed === null && mine !== null) problems.push(`${path}: any value in theirs, ${[...mine].join('|')} in ours`);
  const objects = [theirs, ...(theirs.anyOf ?? [])].filter((s) => s.properties);
  for (const o of objects) {
    const mineObj = branch(doc, ours, 'object');
    if (!mineObj) continue; // reported above as a type
    for (const [name, prop] of Object.entries(o.properties ?? {})) {
      if (!(mineObj.properties && name in mineObj.properties)) problems.push(`${path}.${name}: in theirs, not a field of ours`);
      else problems.push(...requestIncompatibilities(doc, mineObj.properties[name], prop, `${path}.${name}`));
    }
    for (const name of mineObj.required ?? []) if (!o.properties?.[name]?.required) problems.push(`${path}.${name}: required in ours, optional in theirs`);
  }
  const arrays = [theirs, ...(theirs.anyOf ?? [])].filter((s) => s.items);
  for (const a of arrays) {
    const mineArr = branch(doc, ours, 'array');
    if (mineArr) problems.push(...requestIncompatibilities(doc, mineArr.items ?? {}, a.items!, `${path}[]`));
  }
  return problems;
}
