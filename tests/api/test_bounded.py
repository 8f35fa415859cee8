"""Tests for L{orchd.api.bounded}: the nesting bound and bounded JSON text."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.bounded import MAX_DEPTH, parse_json, within_depth


def nested(depth):
    value = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


class DepthTests(SynchronousTestCase):
    def test_within(self):
        """Objects and lists count; scalars do not."""
        self.assertTrue(within_depth(nested(MAX_DEPTH)))
        self.assertFalse(within_depth(nested(MAX_DEPTH + 1)))
        self.assertTrue(within_depth("text"))
        self.assertTrue(within_depth([[1], {"a": [2]}], limit=3))
        self.assertFalse(within_depth([[1], {"a": [[2]]}], limit=3))

    def test_no_recursion(self):
        """A value far deeper than Python's recursion limit is measured without recursing."""
        value = []
        for _ in range(50_000):
            value = [value]
        self.assertFalse(within_depth(value))


class ParseJSONTests(SynchronousTestCase):
    def test_parse(self):
        """JSON text decodes; malformed or too deep text is a ValueError."""
        self.assertEqual(parse_json('{"a": [1]}'), {"a": [1]})
        self.assertRaises(ValueError, parse_json, "{")
        self.assertRaises(ValueError, parse_json, "[" * 200 + "]" * 200)
        self.assertRaises(ValueError, parse_json, "[" * 5000 + "]" * 5000)
