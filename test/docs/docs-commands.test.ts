import test from 'ava';
import type { Command } from 'commander';
import { buildProgram } from '../../src/cli/index.js';
import { codeSpans, DOCS, fencedBlocks, prose, section, tablesOf } from './helpers/markdown.js';

// The command lines the docs show hold to the real commander tree (built as bin/posthorn builds
// it, without running it): every `posthorn <command> [subcommand]` exists and every --option
// shown is one of that command's; and operations.md's table lists every command there is.

const program = buildProgram();

const isHidden = (c: Command) => (c as unknown as { _hidden?: boolean })._hidden === true;
const pathOf = (c: Command): string => {
  const names: string[] = [];
  for (let x: Command | null = c; x && x.parent; x = x.parent) names.unshift(x.name());
  return names.join(' ');
};
const sub = (c: Command, name: string) => c.commands.find((s) => s.name() === name || s.aliases().includes(name));
const optionOf = (c: Command, flag: string) => (flag === '--help' || flag === '-h' ? { required: false, optional: false } : c.options.find((o) => o.long === flag || o.short === flag));

/** Placeholders the docs write where arguments go, that are neither a command nor an option. */
const PLACEHOLDERS = new Set(['[selectors]', '...']);

interface Checked {
  /** The commands the line reaches (one, or one per alternative of `[a|b]`). */
  commands: Command[];
  problems: string[];
}

/**
 * Checks one invocation: `posthorn [--config P] command [subcommand] [args] [--option [value]]...`.
 * `[a|b|c]` where each is a subcommand stands for each of them (and `[a]` for the command with or
 * without it); the rest of the line must then hold for every one.
 */
function checkInvocation(words: string[]): Checked {
  const problems: string[] = [];
  let current: Command[] = [program];
  let i = 0;
  let sawCommand = false;
  while (i < words.length) {
    const word = words[i]!;
    const bare = word.replace(/^\[+/, '').replace(/\]+$/, '');
    const alternatives = /^\[[a-z|-]+\]$/.test(word) ? bare.split('|') : undefined;
    if (alternatives && current.length === 1 && alternatives.every((a) => sub(current[0]!, a))) {
      const parent = current[0]!;
      current = alternatives.map((a) => sub(parent, a)!);
      // `[summary]` alone: the command without it is meant as well.
      if (alternatives.length === 1) current.push(parent);
      sawCommand = true;
      i++;
      continue;
    }
    if (/^-/.test(bare) && !PLACEHOLDERS.has(word)) {
      const flag = bare.split('=')[0]!;
      let takesValue = false;
      for (const c of current) {
        const opt = optionOf(c, flag);
        if (!opt) problems.push(`${c === program ? 'posthorn' : `posthorn ${pathOf(c)}`} has no option ${flag}`);
        else takesValue ||= opt.required || opt.optional;
      }
      i++;
      // Its value (`--team ID`, `--email ID...`), unless written with = or absent from an optional one.
      if (takesValue && !bare.includes('=') && i < words.length && !/^\[?-/.test(words[i]!)) i++;
      continue;
    }
    if (current.length === 1 && current[0]!.commands.length && /^[a-z][a-z-]*$/.test(word)) {
      const next = sub(current[0]!, word);
      if (!next) {
        problems.push(`${current[0] === program ? 'posthorn' : `posthorn ${pathOf(current[0]!)}`} has no command ${word}`);
        return { commands: [], problems };
      }
      current = [next];
      sawCommand = true;
      i++;
      continue;
    }
    // An argument (ID, NAME|ID, you@example.com, [DELIVERY_ID]) of the command reached so far.
    for (const c of current) {
      if (!sawCommand && !PLACEHOLDERS.has(word)) problems.push(`"${word}" where a command was expected`);
      else if (!PLACEHOLDERS.has(word) && c.registeredArguments.length === 0) problems.push(`posthorn ${pathOf(c)} takes no argument, the doc gives it "${word}"`);
    }
    i++;
  }
  if (!sawCommand && !words.some((w) => w === '--version' || w === '-V' || w === '--help')) problems.push('names no command');
  return { commands: sawCommand ? current : [], problems };
}

const words = (line: string) => line.trim().split(/\s+/).filter(Boolean);

/** An invocation as a shell would end it: at a comment, a pipe, a redirection or `&&`. */
function shellWords(line: string): string[] {
  const out: string[] = [];
  // A command substitution is one word of the command line ($(date +%F)).
  for (const w of words(line.replace(/\$\([^)]*\)/g, 'X'))) {
    if (/^(#|\||>|2>|&&|;)/.test(w)) break;
    out.push(w);
  }
  return out;
}

/** `posthorn a b | c D | e`: the first is a whole command line, each later one a sibling of its last command. */
function alternativesOf(line: string): string[][] {
  const [first, ...rest] = line.split(' | ').map(words);
  const head = first!.slice(0, 2); // posthorn <group>
  return [first!, ...rest.map((r) => (r[0]?.startsWith('[') || r[0]?.startsWith('-') ? [...first!, ...r] : [...head, ...r]))];
}

interface Invocation {
  at: string;
  words: string[];
}

/** Every command line the docs show: in code spans, in code blocks, in tables. */
function invocations(): Invocation[] {
  const out: Invocation[] = [];
  const start = /(?:^|[\s;&|(])(?:[\w./-]*\/)?bin\/posthorn\s+(.*)$|^(?:[^|#]*\|\s*)?posthorn\s+(.*)$/;
  for (const file of DOCS) {
    for (const span of codeSpans(prose(file))) {
      const m = /^(?:node\s+)?(?:bin\/)?posthorn\s+(.*)$/.exec(span);
      if (m) out.push({ at: `${file}: \`${span}\``, words: ['posthorn', ...shellWords(m[1]!)] });
    }
    for (const block of fencedBlocks(file)) {
      const lines = block.text.replace(/\\\n\s*/g, ' ').split('\n');
      const commandList = file === 'README.md' && section('README.md', 'Command line').includes(block.text);
      lines.forEach((line, n) => {
        if (commandList) {
          // README's summary: `posthorn <command line>   <what it does>`, `a | b` for siblings.
          if (!line.startsWith('posthorn ')) return;
          for (const alt of alternativesOf(line.split(/\s{2,}/)[0]!)) out.push({ at: `${file}:${block.line + n}`, words: alt });
          return;
        }
        const m = start.exec(line);
        const rest = m?.[1] ?? m?.[2];
        // Not `bin/posthorn    runs the compiled CLI` (a file in a listing of files).
        if (rest !== undefined && !/bin\/posthorn\s{2,}/.test(line)) out.push({ at: `${file}:${block.line + n}`, words: ['posthorn', ...shellWords(rest)] });
      });
    }
  }
  for (const row of commandTable().rows) {
    const span = codeSpans(row.cells[0]!)[0] ?? '';
    out.push({ at: row.at, words: words(span) });
  }
  return out;
}

function commandTable() {
  const table = tablesOf('docs/operations.md').find((t) => t.headings.at(-1) === 'Command line' && t.header[0] === 'Command');
  if (!table) throw new Error('docs/operations.md has no command table under "## Command line"');
  return table;
}

test('every command line in the docs names a real command and only its options', (t) => {
  const all = invocations();
  const problems = all.flatMap((inv) => {
    if (inv.words[0] !== 'posthorn') return [`${inv.at}: not a posthorn command line`];
    return checkInvocation(inv.words.slice(1)).problems.map((p) => `${inv.at}: ${p}`);
  });
  t.log(`${all.length} command lines`);
  t.true(all.length > 80);
  t.deepEqual(problems, []);
});

test("operations.md's command table lists every command", (t) => {
  const listed = new Set<string>();
  for (const row of commandTable().rows) {
    for (const c of checkInvocation(words(codeSpans(row.cells[0]!)[0] ?? '').slice(1)).commands) listed.add(pathOf(c));
  }
  const every: string[] = [];
  const visit = (c: Command) => {
    for (const s of c.commands) {
      if (isHidden(s)) continue;
      if (!s.commands.length) every.push(pathOf(s));
      visit(s);
    }
  };
  visit(program);
  t.true(every.length > 30);
  t.deepEqual(
    every.filter((c) => !listed.has(c)),
    [],
  );
});

test('the checker finds a wrong command, subcommand and option', (t) => {
  const problems = (line: string) => checkInvocation(words(line)).problems;
  t.deepEqual(problems('queue messages --state S --json'), []);
  t.deepEqual(problems('queue [summary|trace] [--json]'), []);
  t.deepEqual(problems('--config /etc/posthorn.toml store copy --to URL'), []);
  t.regex(problems('queue purge ID --json')[0] ?? '', /posthorn queue purge has no option --json/);
  t.regex(problems('teams remove 1')[0] ?? '', /posthorn teams has no command remove/);
  t.regex(problems('sever')[0] ?? '', /posthorn has no command sever/);
  t.regex(problems('keys create --nme N')[0] ?? '', /has no option --nme/);
  t.regex(problems('migrate now')[0] ?? '', /takes no argument/);
});
