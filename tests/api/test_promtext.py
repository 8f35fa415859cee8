"""Reading Prometheus text samples."""

import math

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.promtext import ParseError, parse_samples


class ParseTests(SynchronousTestCase):
    """Samples, labels, escapes and timestamps; anything else is refused."""

    def test_samples(self):
        """Comments are skipped; labels, values and timestamps are read."""
        text = ('# HELP a x\n# TYPE a counter\na 1\n'
                'b{pod="p",namespace="n",} 2.5e3 1700000000000\n\nc{} NaN\nd +Inf\n')
        a, b, c, d = parse_samples(text)
        self.assertEqual((a.name, a.labels, a.value, a.timestamp), ("a", {}, 1.0, None))
        self.assertEqual((b.labels, b.value, b.timestamp),
                         ({"pod": "p", "namespace": "n"}, 2500.0, 1700000000000))
        self.assertTrue(math.isnan(c.value))
        self.assertEqual(d.value, math.inf)

    def test_escapes(self):
        """Backslash, quote and newline escapes in label values are undone."""
        [sample] = parse_samples('m{a="x\\"y\\\\z\\n"} 0\n')
        self.assertEqual(sample.labels, {"a": 'x"y\\z\n'})

    def test_refused(self):
        """Lines that are not samples are errors naming the line."""
        for text in ("<html>", "m{a=b} 1", 'm{a="b" 1', "m", "m 1 2 3", "m x", "m 1 1.5",
                     'm{a="b"c="d"} 1', "m{} 1x", "m1x"):
            with self.assertRaises(ParseError, msg=text):
                parse_samples(text)
