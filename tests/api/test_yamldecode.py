"""Tests for L{orchd.api.yamldecode}: YAML as JSON, with bounded work."""

import time

import yaml
from twisted.trial.unittest import SynchronousTestCase

from orchd.api.bounded import MAX_DEPTH
from orchd.api.yamldecode import YAMLDecodeError, allowed_alias_ratio, load, load_file

#: The 600-byte body of the issue: nine levels of nine aliases, 9**9 strings.
BILLION_LAUGHS = b"""apiVersion: v1
kind: ConfigMap
metadata:
  name: lol
data:
  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def nested(depth):
    return "[" * depth + "]" * depth


class ValueTests(SynchronousTestCase):
    def test_json_types(self):
        """Scalars resolve as YAML 1.1 does; timestamps stay strings."""
        value, _ = load("a: 1\nb: [2.5, true, no, null, ~, 'x', 0x10, 010]\n"
                        "t: 2024-01-01T00:00:00Z\n")
        self.assertEqual(value, {"a": 1, "b": [2.5, True, False, None, None, "x", 16, 8],
                                 "t": "2024-01-01T00:00:00Z"})

    def test_keys_become_strings(self):
        """Numbers, booleans and null as keys are written as JSON writes them."""
        self.assertEqual(load("1: a\ntrue: b\n~: c\n1.5: d\n")[0],
                         {"1": "a", "true": "b", "null": "c", "1.5": "d"})

    def test_same_result_as_pyyaml_without_aliases(self):
        """Documents without aliases decode as PyYAML's safe loader decodes them."""
        text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, labels: {a: b}}\n"
                "spec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n"
                "      - name: c\n        image: nginx\n        ports: [{containerPort: 80}]\n"
                "        args: ['a b', \"c\"]\n        command:\n        - |\n          block\n"
                "          text\n")
        self.assertEqual(load(text)[0], yaml.safe_load(text))

    def test_aliases_are_copies(self):
        """Each alias is its own copy: changing one place leaves the others alone."""
        value, _ = load("a: &x {k: [1]}\nb: *x\n")
        value["b"]["k"].append(2)
        self.assertEqual(value["a"], {"k": [1]})

    def test_merge_keys(self):
        """C{<<} merges a mapping or a list of them; the mapping's own keys win."""
        value, _ = load("base: &b {x: 1, y: 2}\nm:\n  <<: [*b, {z: 3, x: 9}]\n  y: 5\n"
                        "s: <<\n")
        self.assertEqual(value["m"], {"x": 1, "y": 5, "z": 3})
        self.assertEqual(value["s"], "<<")

    def test_empty_document(self):
        """An empty document is None."""
        self.assertEqual(load(b"")[0], None)
        self.assertEqual(load(b"---\n")[0], None)

    def test_integers_past_int64_become_floats(self):
        """As upstream's untyped decoding: a number beyond int64 is a float."""
        self.assertEqual(load("a: 99999999999999999999")[0], {"a": 1e20})

    def test_modest_aliasing_is_allowed(self):
        """Anchors used as people use them (a shared block, a few times) decode."""
        text = "env: &env [{name: A, value: '1'}, {name: B, value: '2'}]\n" + "".join(
            f"c{i}: {{env: *env}}\n" for i in range(50))
        value, _ = load(text)
        self.assertEqual(value["c49"]["env"][1], {"name": "B", "value": "2"})


class DuplicateTests(SynchronousTestCase):
    def test_paths_of_repeated_keys(self):
        """Keys repeated in one mapping are reported by path; the last one wins."""
        value, repeated = load("a: 1\na: 2\nb: {c: 1, c: 2}\nl: [{k: 1, k: 2}]\n")
        self.assertEqual(value, {"a": 2, "b": {"c": 2}, "l": [{"k": 2}]})
        self.assertEqual(repeated, ["a", "b.c", "l[0].k"])

    def test_merged_keys_are_not_duplicates(self):
        """A key given by a merge and by the mapping itself is not repeated."""
        self.assertEqual(load("b: &b {x: 1}\nm: {<<: *b, x: 2}\n")[1], [])


class RefusalTests(SynchronousTestCase):
    def assertRefused(self, text, says):
        error = self.assertRaises(YAMLDecodeError, load, text)
        self.assertIn(says, str(error))

    def test_billion_laughs_refused_at_once(self):
        """The issue's 600-byte alias bomb is refused in milliseconds, not expanded."""
        started = time.process_time()
        self.assertRefused(BILLION_LAUGHS, "excessive aliasing")
        self.assertLess(time.process_time() - started, 0.5)

    def test_recursive_alias(self):
        """An anchor whose value contains itself is refused."""
        self.assertRefused("a: &a [*a]", "anchor 'a' value contains itself")
        self.assertRefused("a: &a {b: *a}", "contains itself")

    def test_unknown_alias(self):
        """An alias of no anchor is refused."""
        self.assertRefused("a: *nowhere", "unknown anchor 'nowhere'")

    def test_redefined_anchor(self):
        """An anchor defined twice is refused."""
        self.assertRefused("a: &x 1\nb: &x 2\n", "duplicate anchor")

    def test_depth(self):
        """Nesting up to the bound decodes; one more level is refused."""
        self.assertEqual(load(nested(MAX_DEPTH))[0] is not None, True)
        self.assertRefused(nested(MAX_DEPTH + 1), f"exceeded max depth of {MAX_DEPTH}")
        self.assertRefused(nested(100_000), "depth")

    def test_alias_depth(self):
        """An alias is charged the depth of its value where it lands."""
        deep = nested(MAX_DEPTH - 1)
        self.assertRefused(f"a: &x {deep}\nb: [[*x]]\n", "exceeded max depth")

    def test_values_json_cannot_hold(self):
        """Binary, sets, ordered maps, custom tags and complex keys are refused."""
        self.assertRefused("a: !!binary aGk=", "tag:yaml.org,2002:binary")
        self.assertRefused("a: !!set {x}", "unsupported YAML value")
        self.assertRefused("a: !!omap [{x: 1}]", "unsupported YAML value")
        self.assertRefused("a: !!python/object:os.system x", "python/object")
        self.assertRefused("? [a]\n: b\n", "mapping keys must be")
        self.assertRefused("? &k {a: 1}\n: b\nc: {*k: d}\n", "mapping keys must be")

    def test_numbers_out_of_range(self):
        """Infinities, NaN and integers of more digits than Python converts are refused."""
        self.assertRefused("a: .inf", "out of range")
        self.assertRefused("a: -.Inf", "out of range")
        self.assertRefused("a: .nan", "out of range")
        self.assertRefused("a: " + "9" * 5000, "cannot read the value")

    def test_bad_merge(self):
        """A merge of something other than mappings is refused."""
        self.assertRefused("a: {<<: 1}", "for merging")
        self.assertRefused("a: {<<: [1]}", "for merging")

    def test_several_documents(self):
        """A body holds one document."""
        self.assertRefused("a: 1\n---\nb: 2\n", "single document")

    def test_malformed(self):
        """libyaml's errors read as one line: where, then what."""
        self.assertRefused("a: [1,\n  b: }\n", "line 2, column ")

    def test_invalid_utf8(self):
        """Bytes that are not UTF-8 are refused."""
        self.assertRefused(b"a: \xff\xfe", "invalid UTF-8")


class AllowanceTests(SynchronousTestCase):
    def test_ratio_falls_with_size(self):
        """Small documents may be mostly aliases; large ones little."""
        self.assertEqual(allowed_alias_ratio(1000), 0.99)
        self.assertEqual(allowed_alias_ratio(400_000), 0.99)
        self.assertAlmostEqual(allowed_alias_ratio(2_200_000), 0.545)
        self.assertEqual(allowed_alias_ratio(5_000_000), 0.10)


class FileTests(SynchronousTestCase):
    def test_file_size_bounded(self):
        """A file past the bound is refused unread; a missing one raises OSError."""
        path = self.mktemp()
        with open(path, "wb") as f:
            f.write(b"a: " + b"x" * (4 * 1024 * 1024))
        self.assertRaises(YAMLDecodeError, load_file, path)
        self.assertRaises(OSError, load_file, path + ".missing")
