import { z } from 'zod';
import { configSchema } from './schema.js';

/*
 * The configuration schema read as a list: every key with its path, kind, default, doc and
 * environment variable. load.ts takes the environment names from here, and config-example.ts
 * writes the commented example file, so neither can drift from the schema.
 */

export type KeyKind = 'string' | 'int' | 'number' | 'bool' | 'list' | 'tables';

export interface ConfigKey {
  path: string[];
  kind: KeyKind;
  doc: string;
  /** POSTHORN_ and the path in capitals (outbound.relay.host: POSTHORN_OUTBOUND_RELAY_HOST), unless the schema names an older one. */
  env: string;
  /** kind 'tables' (an array of TOML tables): each table's fields and their docs, and an example. */
  fields?: { name: string; doc: string }[];
  example?: string[];
}

const envName = (path: string[]) => `POSTHORN_${path.map((p) => p.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()).join('_')}`;

export interface ConfigSection {
  path: string[];
  doc?: string;
  keys: ConfigKey[];
  sections: ConfigSection[];
}

type Meta = { description?: string; env?: string; example?: string[] };
type Def = { type: string; innerType?: z.ZodType; in?: z.ZodType; element?: z.ZodType; shape?: Record<string, z.ZodType>; checks?: { _zod: { def: { format?: string; check?: string } } }[] };

const defOf = (s: z.ZodType) => (s as unknown as { _zod: { def: Def } })._zod.def;
const metaOf = (s: z.ZodType): Meta => (z.globalRegistry.get(s) as Meta | undefined) ?? {};

/** Unwraps defaults, prefaults and pipes, collecting the metadata found on the way. */
function unwrap(schema: z.ZodType): { core: z.ZodType; meta: Meta } {
  let s = schema;
  let meta: Meta = { ...metaOf(s) };
  for (;;) {
    const def = defOf(s);
    const next = def.type === 'default' || def.type === 'prefault' || def.type === 'optional' ? def.innerType : def.type === 'pipe' ? def.in : undefined;
    if (!next) return { core: s, meta };
    s = next;
    meta = { ...metaOf(s), ...meta };
  }
}

function kindOf(core: z.ZodType): KeyKind {
  const def = defOf(core);
  switch (def.type) {
    case 'boolean':
      return 'bool';
    case 'array':
      return def.element && defOf(unwrap(def.element).core).type === 'object' ? 'tables' : 'list';
    case 'number':
      return (def.checks ?? []).some((c) => c._zod.def.format === 'safeint' || c._zod.def.check === 'number_format') ? 'int' : 'number';
    default:
      return 'string';
  }
}

function walk(schema: z.ZodType, path: string[], doc?: string): ConfigSection {
  const out: ConfigSection = { path, doc, keys: [], sections: [] };
  const shape = defOf(schema).shape ?? {};
  for (const [name, child] of Object.entries(shape)) {
    const { core, meta } = unwrap(child);
    if (defOf(core).type === 'object') out.sections.push(walk(core, [...path, name], meta.description));
    else {
      const kind = kindOf(core);
      const k: ConfigKey = { path: [...path, name], kind, doc: meta.description ?? '', env: meta.env ?? envName([...path, name]) };
      if (kind === 'tables') {
        const item = unwrap(defOf(core).element!).core;
        k.fields = Object.entries(defOf(item).shape ?? {}).map(([f, s]) => ({ name: f, doc: unwrap(s).meta.description ?? '' }));
        if (meta.example) k.example = meta.example;
      }
      out.keys.push(k);
    }
  }
  return out;
}

/** The schema as nested sections, in declaration order. */
export function configSections(): ConfigSection {
  return walk(configSchema, []);
}

/** Every key, depth first. */
export function configKeys(): ConfigKey[] {
  const all: ConfigKey[] = [];
  const visit = (s: ConfigSection) => {
    all.push(...s.keys);
    s.sections.forEach(visit);
  };
  visit(configSections());
  return all;
}
