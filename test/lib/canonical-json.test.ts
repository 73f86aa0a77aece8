import test from 'ava';
import { canonicalJson } from '../../src/lib/canonical-json.js';

test('key order and whitespace do not matter; values and nesting do', (t) => {
  t.is(canonicalJson(JSON.parse('{ "b": 1, "a": {"d": [1, {"f": 2, "e": 3}], "c": null} }')), '{"a":{"c":null,"d":[1,{"e":3,"f":2}]},"b":1}');
  t.not(canonicalJson({ a: [1, 2] }), canonicalJson({ a: [2, 1] }));
});

test('a "__proto__" member is a key like any other (two bodies that differ there do not hash the same)', (t) => {
  const withProto = JSON.parse('{"b":1,"__proto__":{"x":1}}');
  t.is(canonicalJson(withProto), '{"__proto__":{"x":1},"b":1}');
  t.not(canonicalJson(withProto), canonicalJson({ b: 1 }));
});
