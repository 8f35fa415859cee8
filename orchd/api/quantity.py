# -*- test-case-name: tests.api.test_quantity -*-
"""
Resource quantities (C{100m}, C{1Gi}, C{1e3}, C{0.5}): their value.

The grammar is upstream's (C{apimachinery/pkg/api/resource/quantity.go})::

    <quantity>     ::= <sign>? <number> <suffix>
    <number>       ::= <digits> | <digits> . <digits>? | . <digits>
    <suffix>       ::= <binarySI> | <decimalSI> | (e | E) <sign>? <digits>
    <binarySI>     ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>    ::= n | u | m | "" | k | M | G | T | P | E

The value is exact: a L{Fraction} of base units (cores, bytes, pods), so
C{0.1} and C{100m} are equal, as upstream's infinite-precision decimals
make them. Only the value is read here; the canonical text a quantity is
written back in is not computed.
"""

import re
from fractions import Fraction

_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50,
           "Ei": 2 ** 60}
_DECIMAL = {"n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000),
            "": 1, "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15,
            "E": 10 ** 18}
#: A suffix alone wins over an exponent: C{1E} is an exa, C{1E3} a thousand.
_QUANTITY = re.compile(
    r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?[0-9]+))?")
#: Upstream reads the exponent as a 32-bit integer; beyond a few hundred
#: the value is far past any resource (and 10**(2**31) would take the
#: process's memory), so larger exponents are refused as malformed.
MAX_EXPONENT = 300
#: The message upstream's validation gives for text that is not a quantity.
QUANTITY_REGEX = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"


def parse_quantity(text):
    """
    The value of quantity C{text} in base units.

    @raise ValueError: for text that is not a quantity (empty, spaces, an
        unknown suffix, two dots, an exponent beyond L{MAX_EXPONENT}).
    """
    if not isinstance(text, str):
        raise ValueError(f"quantities must be strings, not {type(text).__name__}")
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"quantities must match the regular expression '{QUANTITY_REGEX}'")
    sign, number, suffix, exponent = match.groups()
    value = Fraction(number if not number.endswith(".") else number[:-1])
    if exponent is not None:
        power = int(exponent)
        if abs(power) > MAX_EXPONENT:
            raise ValueError(f"quantity exponent out of range: {text}")
        value *= Fraction(10) ** power
    elif suffix:
        value *= _BINARY.get(suffix) or _DECIMAL[suffix]
    return -value if sign == "-" else value
