"""Resource quantities read as upstream's grammar reads them."""

from fractions import Fraction

from twisted.trial.unittest import SynchronousTestCase

from orchd.api.quantity import parse_quantity


class ParseQuantityTests(SynchronousTestCase):
    def test_values(self):
        """Each suffix, exponent and fraction form has upstream's exact value."""
        cases = {
            "100m": Fraction(1, 10), "0.1": Fraction(1, 10), "1": 1, "1.5": Fraction(3, 2),
            "1Gi": 2 ** 30, "1.5Gi": 3 * 2 ** 29, "128Mi": 128 * 2 ** 20, "1Ki": 1024,
            "1e3": 1000, "1E3": 1000, "1e-3": Fraction(1, 1000), "2E+2": 200, "1k": 1000,
            "1M": 10 ** 6, "1G": 10 ** 9, "1T": 10 ** 12, "1P": 10 ** 15, "1E": 10 ** 18,
            "1Ei": 2 ** 60, "5n": Fraction(5, 10 ** 9), "5u": Fraction(5, 10 ** 6),
            ".5": Fraction(1, 2), "5.": 5, "+1": 1, "-1": -1, "-0.5Gi": -(2 ** 29), "0": 0,
            "007": 7,
        }
        for text, value in cases.items():
            self.assertEqual(parse_quantity(text), value, text)

    def test_malformed(self):
        """Text that is not a quantity raises ValueError naming upstream's expression."""
        for text in ("", " 1", "1 ", "abc", "1.5.5", ".", "1e", "1Kb", "1K", "1mi", "--1",
                     "1e3.5", "1Gi1", "0x10", "1_000", "∞", "1e99999999999"):
            with self.assertRaises(ValueError, msg=text):
                parse_quantity(text)

    def test_exponent_bound(self):
        """An exponent within the bound is exact; one past it is refused, not computed."""
        self.assertEqual(parse_quantity("1e300"), 10 ** 300)
        self.assertRaises(ValueError, parse_quantity, "1e301")
        self.assertRaises(ValueError, parse_quantity, "1e-2147483648")

    def test_only_text(self):
        """Numbers and other values are not quantities."""
        for value in (1, 1.5, None, ["1"]):
            self.assertRaises(ValueError, parse_quantity, value)
