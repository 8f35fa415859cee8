"""Resource quantities: upstream's grammar, exact values and serialized form."""

from fractions import Fraction

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.quantity import (
    FORMAT_ERROR, NUMERIC_ERROR, SUFFIX_ERROR, canonical, parse, parse_quantity,
)


class ParseTests(SynchronousTestCase):
    def test_suffixes(self):
        """Decimal, binary and exponent suffixes scale the number into base units."""
        cases = {
            "100m": Fraction(1, 10), "1": 1, "1k": 1000, "1M": 10 ** 6, "1G": 10 ** 9,
            "1T": 10 ** 12, "1P": 10 ** 15, "1E": 10 ** 18, "1n": Fraction(1, 10 ** 9),
            "1u": Fraction(1, 10 ** 6), "1Ki": 1024, "1Mi": 1 << 20, "1Gi": 1 << 30,
            "1Ti": 1 << 40, "1Pi": 1 << 50, "2Ei": 2 << 60, "1e3": 1000, "1E3": 1000,
            "1e+3": 1000, "5e-3": Fraction(5, 1000), "1.5Gi": 3 << 29, "0.5": Fraction(1, 2),
            ".5": Fraction(1, 2), "1.": 1, "-1.5k": -1500, "+2": 2, "007": 7,
        }
        for text, value in cases.items():
            self.assertEqual(parse_quantity(text), value, text)

    def test_returns_a_fraction(self):
        """The value is an exact Fraction of base units."""
        self.assertIsInstance(parse_quantity("250m"), Fraction)
        self.assertIsInstance(parse_quantity("1.5Gi"), Fraction)

    def test_rounds_up_to_nano(self):
        """Values finer than a nano are rounded away from zero to a nano, as upstream."""
        self.assertEqual(parse_quantity("1.5n"), Fraction(2, 10 ** 9))
        self.assertEqual(parse_quantity("-1.5n"), Fraction(-2, 10 ** 9))
        self.assertEqual(parse_quantity("1e-12"), Fraction(1, 10 ** 9))

    def test_capped_at_int64(self):
        """Magnitudes past 2^63-1 base units are capped there."""
        self.assertEqual(parse_quantity("100E"), 2 ** 63 - 1)
        self.assertEqual(parse_quantity("16Ei"), 2 ** 63 - 1)
        self.assertEqual(parse_quantity("-100E"), -(2 ** 63 - 1))

    def test_huge_exponents_are_cheap(self):
        """An absurd exponent is capped or rounded, never computed digit by digit."""
        self.assertEqual(parse_quantity("1e2000000000"), 2 ** 63 - 1)
        self.assertEqual(parse_quantity("1e-2000000000"), Fraction(1, 10 ** 9))
        self.assertEqual(parse_quantity("0e2000000000"), 0)

    def test_exponent_is_an_int32(self):
        """As upstream, an exponent is read as an int64 and kept to its low 32 bits."""
        self.assertEqual(parse_quantity("1e4294967299"), 1000)
        with self.assertRaises(ValueError) as raised:
            parse_quantity("1e" + "9" * 40)
        self.assertEqual(str(raised.exception), SUFFIX_ERROR)

    def test_odd_but_valid(self):
        """Upstream's parser accepts a lone sign or point as zero, and a point before a suffix."""
        for text in (".", "+", "-", "e3", "Gi"):
            self.assertEqual(parse_quantity(text), 0, text)
        self.assertEqual(parse_quantity("1.G"), 10 ** 9)

    def test_format_errors(self):
        """Text outside the grammar is refused with upstream's regular-expression message."""
        for text in ("", "abc", "1.5.5", "1 ", " 1", "1e3.5", "1/2", "0x10", None, 5):
            with self.assertRaises(ValueError) as raised:
                parse_quantity(text)
            self.assertEqual(str(raised.exception), FORMAT_ERROR, text)
        self.assertIn("'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'", FORMAT_ERROR)

    def test_suffix_errors(self):
        """Suffix characters that form no suffix are refused with upstream's suffix message."""
        for text in ("1e", "1iG", "1G5", "1K", "1mi", "--1", "1Kb"):
            with self.assertRaises(ValueError) as raised:
                parse_quantity(text)
            self.assertIn(str(raised.exception), (SUFFIX_ERROR, FORMAT_ERROR), text)
        with self.assertRaises(ValueError) as raised:
            parse_quantity("1e")
        self.assertEqual(str(raised.exception), SUFFIX_ERROR)

    def test_too_many_digits(self):
        """A number of thousands of digits is refused instead of computed with."""
        with self.assertRaises(ValueError) as raised:
            parse_quantity("1" * 5000)
        self.assertEqual(str(raised.exception), NUMERIC_ERROR)


class CanonicalTests(SynchronousTestCase):
    def test_canonical_forms(self):
        """Quantities are written back as upstream serializes them."""
        cases = {
            "0": "0", "0m": "0", "0Ki": "0", "0.0": "0", "1m": "1m", "100m": "100m",
            "1000m": "1", "0.5": "500m", "0.1": "100m", "1.1": "1100m", "1.0": "1",
            "1000": "1k", "1500": "1500", "1Ki": "1Ki", "1024Ki": "1Mi", "128Mi": "128Mi",
            "100Mi": "100Mi", "1.5Gi": "1536Mi", "0.5Gi": "512Mi", "1.5Ki": "1536",
            "512": "512", "1e3": "1e3", "12e6": "12e6", "15e2": "1500", "1500e0": "1500e0", "-1": "-1",
            "-2Ki": "-2Ki", "2G": "2G", "2000M": "2G", "0.0001": "1m", "1n": "1m",
            "1.5": "1500m", "+1": "+1", "1E3": "1E3",
        }
        for text, written in cases.items():
            self.assertEqual(canonical(text), written, text)

    def test_kept_text(self):
        """Text already in canonical form is kept as written, as upstream's fast path does."""
        self.assertEqual(parse("250m").text, "250m")
        self.assertEqual(parse("1000m").text, None)
        self.assertEqual(str(parse("1000m")), "1")
