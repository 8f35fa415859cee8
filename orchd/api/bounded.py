# -*- test-case-name: tests.api.test_bounded -*-
"""
The bounds every decoder of untrusted documents shares.

Objects are walked recursively all over the server (copies, patches,
managed fields, protobuf); a bound on nesting, checked where a document
is decoded, keeps every one of those walks far from Python's recursion
limit and from orjson's own (254 levels when encoding).
"""

import orjson

#: Deepest nesting of objects and lists accepted anywhere a document is
#: decoded: deep enough for any object (CRD schemas included), and within
#: protobuf's own limit of 100 nested messages.
MAX_DEPTH = 100


def within_depth(value, limit=MAX_DEPTH):
    """Whether C{value} nests objects and lists at most C{limit} deep (no recursion)."""
    if type(value) is not dict and type(value) is not list:
        return True
    pending = [(value, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > limit:
            return False
        for item in value.values() if type(value) is dict else value:
            if type(item) is dict or type(item) is list:
                pending.append((item, depth + 1))
    return True


def parse_json(text):
    """
    A JSON document held inside something else (an annotation, a managed
    field's key, a webhook's answer, a policy line), bounded like a body.

    @raise ValueError: malformed, or nested deeper than L{MAX_DEPTH}.
    """
    value = orjson.loads(text)  # orjson.JSONDecodeError is a ValueError
    if not within_depth(value):
        raise ValueError(f"exceeded max depth of {MAX_DEPTH}")
    return value
