import test from 'ava';
import { msgIdsOf } from '../../src/core/emails/threading.js';

// msgIdsOf reads only the ids of an In-Reply-To or References value: comments and quoted strings
// are skipped, whatever ids they hold, in one linear pass over what a client submitted.

test('an id inside a comment is not kept', (t) => {
  t.deepEqual(msgIdsOf('<a@b> (see <x@y>)'), ['<a@b>']);
  t.deepEqual(msgIdsOf('<a@b>(<x@y>)<c@d>'), ['<a@b>', '<c@d>']);
});

test('nested comments are skipped whole', (t) => {
  t.deepEqual(msgIdsOf('<a@b> (outer (inner <x@y>) still <z@y>) <c@d>'), ['<a@b>', '<c@d>']);
  t.deepEqual(msgIdsOf('((()) <x@y>) <c@d>'), ['<c@d>']);
});

test('an escaped paren inside a comment neither opens nor closes it', (t) => {
  t.deepEqual(msgIdsOf('<a@b> (a \\) <x@y>) <c@d>'), ['<a@b>', '<c@d>']);
  t.deepEqual(msgIdsOf('<a@b> (a \\( <x@y>) <c@d>'), ['<a@b>', '<c@d>']);
  t.deepEqual(msgIdsOf('(\\\\) <c@d>'), ['<c@d>']);
});

test('an unclosed comment runs to the end of the value', (t) => {
  t.deepEqual(msgIdsOf('<a@b> (unclosed <x@y> <z@y>'), ['<a@b>']);
  t.deepEqual(msgIdsOf('<a@b> (open (nested) <x@y>'), ['<a@b>']);
  t.deepEqual(msgIdsOf('<a@b> (ends in a quoted-pair \\'), ['<a@b>']);
});

test('quoted strings are skipped, and a paren inside one opens no comment', (t) => {
  t.deepEqual(msgIdsOf('"<x@y>" <a@b>'), ['<a@b>']);
  t.deepEqual(msgIdsOf('"a ( \\" <x@y>" <a@b>'), ['<a@b>']);
  t.deepEqual(msgIdsOf('<a@b> "unclosed <x@y>'), ['<a@b>']);
});

test('a stray paren at the top level is ignored, and a domain literal may hold parens', (t) => {
  t.deepEqual(msgIdsOf('<a@b> ) <c@d>'), ['<a@b>', '<c@d>']);
  t.deepEqual(msgIdsOf('<a@[x(y]> <c@d>'), ['<a@[x(y]>', '<c@d>']);
});

test('ids are kept in order, each once, and malformed ones dropped', (t) => {
  t.deepEqual(msgIdsOf('junk <a@b> <bad id@b> < <c@d> <a@b> <"q"@b> (c) <e@f>'), ['<a@b>', '<c@d>', '<e@f>']);
});

test('a 1 MB value of opening parens completes, with nothing kept', (t) => {
  t.deepEqual(msgIdsOf('('.repeat(1 << 20)), []);
  t.deepEqual(msgIdsOf('<a@b> ' + '('.repeat(1 << 20) + '<x@y>'), ['<a@b>']);
  t.deepEqual(msgIdsOf('<'.repeat(1 << 20) + 'a@b>'), ['<a@b>']);
  t.deepEqual(msgIdsOf('"\\'.repeat(1 << 19)), []);
});
