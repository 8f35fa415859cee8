# -*- test-case-name: tests.api.crdschema.test_validate -*-
"""
Upstream's wording for value validation failures.

Upstream validates a custom resource with kube-openapi, whose messages
repeat the path (C{spec.replicas in body should be greater than or equal
to 1}), and turns each into a field error: required, enum, maxLength,
maxItems/maxProperties and type failures get their own error types, any
other becomes C{Invalid value}.  Numbers of the schema are Go C{float64}s
printed with C{%v}, which L{go_number} reproduces.
"""

import json
from decimal import Decimal

from orchd.api.errors import TOO_LONG, TOO_MANY, FieldError


def go_number(value):
    """A schema number as Go's C{%v} prints a float64: C{1}, C{0.5}, C{1e+06}."""
    if isinstance(value, bool):
        return "true" if value else "false"
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        return {float("inf"): "+Inf", float("-inf"): "-Inf"}.get(number, "NaN")
    if number == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(number)).normalize().as_tuple()
    text = "".join(str(d) for d in digits)
    point = len(text) + exponent  # digits before the decimal point
    shown = point - 1
    prefix = "-" if sign else ""
    if shown < -4 or shown >= 6:  # Go's shortest %g switches to %e from 1e+06
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if shown < 0 else '+'}{abs(shown):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{prefix}{text}{'0' * (point - len(text))}"
    return f"{prefix}{text[:point]}.{text[point:]}"


def type_name(value):
    """The JSON type name upstream reports for a value."""
    if value is None:
        return "null"
    kind = type(value)
    if kind is bool:
        return "boolean"
    if kind is int:
        return "integer"
    if kind is float:
        return "number"
    if kind is str:
        return "string"
    if kind is dict:
        return "object"
    if kind is list:
        return "array"
    return "object"


def wrong_type(path, expected, value):
    """C{spec.x: Invalid value: "string": spec.x in body must be of type integer: "string"}."""
    actual = type_name(value)
    return FieldError.type_invalid(
        path, actual, f'{path} in body must be of type {expected}: {json.dumps(actual)}')


def bad_format(path, name, value):
    """A string that is not of its C{format}, worded as upstream's strfmt failure."""
    return FieldError.type_invalid(
        path, value, f"{path} in body must be of type {name}: {json.dumps(value, ensure_ascii=False)}")


def invalid(path, value, what):
    """The catch-all: C{Invalid value: <v>: <path> in body <what>}."""
    return FieldError.invalid(path, value, f"{path} in body {what}")


def too_long(path, limit):
    """C{Too long: may not be longer than N} (maxLength counts characters)."""
    return FieldError(TOO_LONG, path, detail=f"may not be longer than {limit}")


def too_many(path, actual, limit):
    """C{Too many: 4: must have at most 3 items} (maxItems and maxProperties alike)."""
    return FieldError(TOO_MANY, path, actual, f"must have at most {limit} items")


def enum_values(values):
    """Enum members as upstream lists them: strings bare, anything else as JSON."""
    out = []
    for value in values:
        if isinstance(value, str):
            out.append(value)
        else:
            out.append(json.dumps(value, separators=(",", ":"), sort_keys=True))
    return out
