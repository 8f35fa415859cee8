# -*- test-case-name: tests.api.test_promtext -*-
"""
Reading the Prometheus text format (version 0.0.4), as a node agent's
C{/metrics/resource} answers it.

Only samples are read: comments (C{# HELP}, C{# TYPE}) and blank lines are
skipped. A line that is not a sample is an error (L{ParseError}), so that a
node answering something else entirely is noticed rather than read as
empty. Values are floats (C{NaN}, C{+Inf} included), timestamps integer
milliseconds, optional.
"""

import math
import re

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,?)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_UNESCAPE = re.compile(r'\\[\\"n]')


class ParseError(ValueError):
    """A line that is not a sample of the text format."""


class Sample:
    """One sample: C{name}, C{labels} (a dict), C{value} (float), C{timestamp} (ms or None)."""

    __slots__ = ("name", "labels", "value", "timestamp")

    def __init__(self, name, labels, value, timestamp=None):
        self.name = name
        self.labels = labels
        self.value = value
        self.timestamp = timestamp

    def __repr__(self):
        return f"Sample({self.name!r}, {self.labels!r}, {self.value!r}, {self.timestamp!r})"


def parse_samples(text):
    """
    Every sample of C{text} (a str), in order.

    @raise ParseError: naming the first line that is not a sample.
    """
    samples = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            samples.append(_sample(line))
        except ParseError as e:
            raise ParseError(f"line {number}: {e}") from None
    return samples


def _sample(line):
    match = _NAME.match(line)
    if match is None:
        raise ParseError("no metric name")
    name, position, labels = match.group(), match.end(), {}
    if position < len(line) and line[position] == "{":
        position += 1
        while True:
            while position < len(line) and line[position] == " ":
                position += 1
            if position < len(line) and line[position] == "}":
                position += 1
                break
            label = _LABEL.match(line, position)
            if label is None:
                raise ParseError("malformed labels")
            labels[label.group(1)] = _UNESCAPE.sub(lambda m: _ESCAPES[m.group()], label.group(2))
            position = label.end()
            if not label.group(3) and not line.startswith("}", position):
                raise ParseError("malformed labels")
    fields = line[position:].split()
    if len(fields) not in (1, 2) or position < len(line) and not line[position].isspace():
        raise ParseError("expected a value and an optional timestamp")
    try:
        value = float(fields[0])
        timestamp = int(fields[1]) if len(fields) == 2 else None
    except ValueError:
        raise ParseError("unreadable value or timestamp") from None
    if math.isnan(value) and fields[0] not in ("NaN", "nan"):
        raise ParseError("unreadable value")
    return Sample(name, labels, value, timestamp)
