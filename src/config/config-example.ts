import { DEFAULT_CONFIG } from './defaults.js';
import { configSections, type ConfigKey, type ConfigSection } from './config-keys.js';

/*
 * The commented configuration file (config.example.toml, and what `posthorn config example`
 * prints), written from the schema: every key, its doc, its environment variable and its
 * default, so the example can not drift from what the process does.
 */

const WIDTH = 100;

function wrap(text: string, prefix = '# '): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && prefix.length + line.length + 1 + word.length > WIDTH) {
      lines.push(prefix + line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(prefix + line);
  return lines;
}

function tomlValue(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(tomlValue).join(', ')}]`;
  if (typeof v === 'string') return JSON.stringify(v);
  return String(v);
}

function valueAt(path: string[]): unknown {
  return path.reduce<unknown>((node, k) => (node as Record<string, unknown>)[k], DEFAULT_CONFIG);
}

function keyLines(k: ConfigKey): string[] {
  if (k.kind === 'tables') {
    // Indented, so the example tables are not mistaken for keys of the section above them.
    const table = `[[${k.path.join('.')}]]`;
    return [
      ...wrap(k.doc),
      `# env: ${k.env} (a JSON array of tables)`,
      `# Each ${table} table:`,
      ...(k.fields ?? []).flatMap((f) => wrap(`${f.name}: ${f.doc}`, '#   ')),
      '# For example:',
      ...(k.example ?? []).map((line) => (line ? `#   ${line}` : '#')),
      `# ${k.path.at(-1)} = ${tomlValue(valueAt(k.path))}`,
    ];
  }
  const value = valueAt(k.path);
  // A key with no default (its doc says what unset means) is shown without a value.
  return [...wrap(k.doc), `# env: ${k.env}`, value === undefined ? `# ${k.path.at(-1)}: unset by default` : `# ${k.path.at(-1)} = ${tomlValue(value)}`];
}

function sectionLines(s: ConfigSection): string[] {
  const out: string[] = [];
  if (s.path.length) {
    out.push('', `[${s.path.join('.')}]`);
    if (s.doc) out.push(...wrap(s.doc), '');
  }
  s.keys.forEach((k, i) => out.push(...(i > 0 || (!s.path.length && out.length) ? [''] : []), ...keyLines(k)));
  for (const child of s.sections) out.push(...sectionLines(child));
  return out;
}

export function configExample(): string {
  const header = [
    '# Posthorn configuration. Every key is optional; each is shown commented out, at its default.',
    '# Precedence: defaults <- this file (posthorn --config <path>) <- POSTHORN_* environment variables.',
    '# Written from the schema by `posthorn config example`.',
    '',
  ];
  return [...header, ...sectionLines(configSections()), ''].join('\n');
}
