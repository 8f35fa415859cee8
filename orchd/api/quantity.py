# -*- test-case-name: tests.api.test_quantity -*-
"""
Resource quantities (C{100m}, C{1Gi}, C{1e3}), read and written as upstream's
C{resource.Quantity} (apimachinery C{pkg/api/resource/quantity.go}).

The grammar::

    <quantity>     ::= <sign>? <number> <suffix>
    <number>       ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>       ::= <binarySI> | <decimalSI> | <decimalExponent>
    <binarySI>     ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>    ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= e <sign>? <digits> | E <sign>? <digits>

A value is exact in base units (a L{Fraction}): rounded up, away from
zero, to a multiple of 10^-9, and capped in magnitude at 2^63-1, as
upstream does. L{canonical} writes it back as upstream serializes it: in
the form the text was written in (binary, decimal or exponent), the
largest suffix that keeps the number whole, and the text itself when
upstream's fast path keeps it (C{100m}, C{1Ki}, even C{+1}).

These are parsed on pod and node writes, so the common forms take a
precompiled match and integer arithmetic; nothing here allocates a
decimal context.
"""

import re
from fractions import Fraction
from functools import lru_cache

#: Upstream's C{splitREString}, quoted in its parse error.
QUANTITY_FORMAT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
#: Upstream's C{ErrFormatWrong}.
FORMAT_ERROR = f"quantities must match the regular expression '{QUANTITY_FORMAT}'"
#: Upstream's C{ErrSuffix}.
SUFFIX_ERROR = "unable to parse quantity's suffix"
#: Upstream's C{ErrNumeric}.
NUMERIC_ERROR = "unable to parse numeric part of quantity"

BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT = "BinarySI", "DecimalSI", "DecimalExponent"

_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
            "E": 18}
_DECIMAL_SUFFIX = {exponent: suffix for suffix, exponent in _DECIMAL.items()}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIX = {exponent: suffix for suffix, exponent in _BINARY.items()}
_MAX = (1 << 63) - 1
_NANO = 10 ** 9
_INT64_FACTORS = 18
#: Past these, a value is capped or rounded up to a nano whatever its digits.
_LARGEST_EXPONENT = 1000
#: More digits than any meaningful quantity has: refused rather than computed with.
_MAX_DIGITS = 1000
#: Texts up to this long are remembered once parsed.
_CACHED_LENGTH = 32

# sign, integer digits, fraction digits (None: no point), suffix (checked apart)
_SHAPE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT_TAIL = re.compile(r"[+-]?[0-9]+")


class Quantity:
    """
    A parsed quantity.

    @ivar value: the amount in base units, a L{Fraction}.
    @ivar format: L{BINARY_SI}, L{DECIMAL_SI} or L{DECIMAL_EXPONENT}.
    @ivar text: the text upstream would keep as the serialization, or None.
    """

    __slots__ = ("value", "format", "text")

    def __init__(self, value, format, text=None):
        self.value = value
        self.format = format
        self.text = text

    def __str__(self):
        return self.text if self.text is not None else _canonical(self.value, self.format)

    def __repr__(self):
        return f"<Quantity {self}>"


def _suffix(suffix):
    """C{(base, exponent, format)} of a suffix; ValueError if it is none."""
    exponent = _DECIMAL.get(suffix)
    if exponent is not None:
        return 10, exponent, DECIMAL_SI
    exponent = _BINARY.get(suffix)
    if exponent is not None:
        return 2, exponent, BINARY_SI
    tail = suffix[1:]
    if suffix[:1] in ("e", "E") and _EXPONENT_TAIL.fullmatch(tail) \
            and len(tail.lstrip("+-").lstrip("0")) <= 19:
        exponent = int(tail)
        if -(1 << 63) <= exponent < (1 << 63):
            # Go parses an int64, then keeps its low 32 bits (an int32 scale).
            return 10, ((exponent + (1 << 31)) & 0xFFFFFFFF) - (1 << 31), DECIMAL_EXPONENT
    raise ValueError(SUFFIX_ERROR)


def _round_up(value, unit):
    """C{value} rounded away from zero to a multiple of C{1/unit}."""
    scaled = value * unit
    if scaled.denominator == 1:
        return value
    numerator, denominator = scaled.numerator, scaled.denominator
    whole = -(-numerator // denominator) if numerator > 0 else numerator // denominator
    return Fraction(whole, unit)


def _power_of_ten(digits, exponent):
    """
    C{digits * 10**exponent}, with exponents far outside any quantity's
    range cut short: past them the value is capped (large) or rounded up to
    a nano (small) all the same, and the power itself would take long.
    """
    if not digits:
        return Fraction(0)
    if exponent > _LARGEST_EXPONENT:
        return Fraction(_MAX + 1)
    if exponent < -_LARGEST_EXPONENT:
        return Fraction(1, _NANO * 10)
    return digits * Fraction(10) ** exponent


def parse(text):
    """
    The L{Quantity} C{text} means (shared between callers: do not change it).

    @raise ValueError: with upstream's message, for text that is not a quantity.
    """
    if not isinstance(text, str) or not text:
        raise ValueError(FORMAT_ERROR)
    if len(text) <= _CACHED_LENGTH:
        return _parse_cached(text)
    return _parse(text)


@lru_cache(maxsize=4096)
def _parse_cached(text):
    # Pods and nodes repeat a few quantities (100m, 64Mi) over and over.
    return _parse(text)


def _parse(text):
    if text == "0":
        return Quantity(Fraction(0), DECIMAL_SI, "0")
    shape = _SHAPE.fullmatch(text)
    if shape is None:
        raise ValueError(FORMAT_ERROR)
    sign, whole, fraction, suffix = shape.groups()
    base, exponent, form = _suffix(suffix)
    num = whole.lstrip("0") or "0"
    denom = fraction or ""
    if len(num) + len(denom) > _MAX_DIGITS:
        raise ValueError(NUMERIC_ERROR)
    positive = sign != "-"
    # Upstream's fast path: an int64 mantissa and a scale of at least nano.
    if form == BINARY_SI:
        precision = (15 - len(num) - int(exponent * 3 / 10) - 1) if not denom else -1
    else:
        precision = _INT64_FACTORS - (len(num) + len(denom))
    if precision >= 0:
        scale = (0 if form == BINARY_SI else exponent) - len(denom)
        if scale >= -9:
            shifted = num + denom
            mantissa = int(shifted)
            amount = mantissa << exponent if form == BINARY_SI else mantissa
            if amount <= _MAX:
                value = _power_of_ten(amount, scale)
                if value > _MAX:
                    value = Fraction(_MAX)
                if form == BINARY_SI:
                    kept = mantissa & 0x07 != 0
                else:
                    kept = scale % 3 == 0 and not shifted.endswith("000") \
                        and shifted[0] != "0"
                return Quantity(value if positive else -value, form, text if kept else None)
    digits = int(num + denom)
    if base == 10:
        magnitude = _power_of_ten(digits, exponent - len(denom))
    else:
        magnitude = Fraction(digits << exponent, 10 ** len(denom))
    if magnitude:
        magnitude = _round_up(magnitude, _NANO)
    if magnitude > _MAX:
        magnitude = Fraction(_MAX)
    if form == BINARY_SI and 0 < magnitude < 1:
        form = DECIMAL_SI
    return Quantity(magnitude if positive else -magnitude, form)


def parse_quantity(text):
    """
    The amount C{text} means, in base units (cores, bytes, ...).

    @raise ValueError: with upstream's message, for text that is not a quantity.
    """
    return parse(text).value


def round_up_milli(quantity):
    """
    C{quantity} rounded up (away from zero) to a thousandth, as upstream
    defaults every ResourceList (C{SetDefaults_ResourceList}); its text is
    kept when nothing changed.
    """
    rounded = _round_up(quantity.value, 1000)
    if rounded == quantity.value:
        return quantity
    return Quantity(rounded, quantity.format)


def canonical(text):
    """
    C{text} as upstream writes the quantity back in a resource list
    (C{0.5} -> C{500m}, C{1024Ki} -> C{1Mi}), after its milli round-up.

    @raise ValueError: for text that is not a quantity.
    """
    if isinstance(text, str) and len(text) <= _CACHED_LENGTH:
        return _canonical_cached(text)
    return str(round_up_milli(parse(text)))


@lru_cache(maxsize=4096)
def _canonical_cached(text):
    return str(round_up_milli(parse(text)))


def _strip_tens(number):
    """C{(n, times)}: C{number} without its trailing decimal zeros (as upstream's removeFactors)."""
    times = 0
    while number and number % 10 == 0:
        number //= 10
        times += 1
    return number, times


def _canonical(value, form):
    """Upstream's C{CanonicalizeBytes}."""
    if value == 0:
        return "0"
    if form == BINARY_SI:
        if -1024 < value < 1024 or value.denominator != 1:
            form = DECIMAL_SI
        else:
            number, times = int(value), 0
            magnitude = abs(number)
            while magnitude >= 1024 and magnitude % 1024 == 0:
                magnitude //= 1024
                times += 1
            number = magnitude if number > 0 else -magnitude
            return f"{number}{_BINARY_SUFFIX.get(times * 10, '')}"
    # value = mantissa * 10^exponent, mantissa whole, exponent a multiple of 3
    denominator = value.denominator
    exponent = 0
    while denominator != 1:
        value *= 10
        denominator = value.denominator
        exponent -= 1
    mantissa, times = _strip_tens(int(value))
    exponent += times
    shift = exponent % 3
    mantissa *= 10 ** shift
    exponent -= shift
    if form == DECIMAL_EXPONENT:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"
