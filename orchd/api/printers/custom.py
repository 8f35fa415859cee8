# -*- test-case-name: tests.api.test_custom_printer -*-
"""
The Tables of a custom resource: C{Name}, then the C{additionalPrinterColumns}
of its version (upstream's C{apiextensions-apiserver/pkg/registry/
customresource/tableconvertor}), or C{Age} when it names none.

A column's C{jsonPath} is a simple JSONPath (upstream's
C{validateSimpleJSONPath} accepts the relaxed form kubectl writes): field
steps C{.spec.replicas}, bracketed names C{['app.kubernetes.io/name']},
indices C{[0]} and equality filters C{[?(@.type=="Ready")]}. A path that
finds nothing gives an empty cell (C{None}); the first value found is the
cell, converted to the column's type as upstream converts it: a C{date}
column reads as an age (C{5m}), a C{string} column holds the value printed.
"""

import re

import orjson

from orchd.api.printers.base import (
    BOOLEAN, DATE, INTEGER, NUMBER, STRING, TYPES, Column, Printer, name_column, parse_time,
)

#: The formats a column may name (upstream's C{printerColumnFormats}).
FORMATS = ("int32", "int64", "float", "double", "byte", "date", "date-time", "password")

_STEP = re.compile(
    r"""\.(?P<field>[^.\[\]]+)"""
    r"""|\[(?P<index>-?\d+)\]"""
    r"""|\[\*\]"""
    r"""|\[(?P<quote>['"])(?P<key>.*?)(?P=quote)\]"""
    r"""|\[\?\(@\.(?P<fpath>[A-Za-z0-9_.\-]+)\s*==\s*(?P<fquote>['"])(?P<fvalue>.*?)(?P=fquote)\)\]"""
)

_ALL = object()


def parse_path(text):
    """
    The steps of a simple JSONPath (with or without C{{}} around it).

    @return: a tuple of steps: a field name (str), an index (int), C{_ALL},
        or C{(field path tuple, value)} for a filter.
    @raise ValueError: when C{text} is not such a path; the message is
        what to tell the writer of the CRD.
    """
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if not text.startswith(".") and not text.startswith("["):
        raise ValueError("must be a simple json path starting with .")
    steps, position = [], 0
    while position < len(text):
        match = _STEP.match(text, position)
        if match is None:
            raise ValueError(f"unexpected path string, expected a simple json path at "
                             f"{text[position:]!r}")
        if match.group("field") is not None:
            steps.append(match.group("field"))
        elif match.group("index") is not None:
            steps.append(int(match.group("index")))
        elif match.group("key") is not None:
            steps.append(match.group("key"))
        elif match.group("fpath") is not None:
            steps.append((tuple(match.group("fpath").split(".")), match.group("fvalue")))
        else:
            steps.append(_ALL)
        position = match.end()
    return tuple(steps)


def find(obj, steps):
    """The values C{steps} reach in C{obj}, in order."""
    values = [obj]
    for step in steps:
        found = []
        for value in values:
            if type(step) is str:
                if isinstance(value, dict) and step in value:
                    found.append(value[step])
            elif type(step) is int:
                if isinstance(value, list) and -len(value) <= step < len(value):
                    found.append(value[step])
            elif step is _ALL:
                if isinstance(value, list):
                    found.extend(value)
                elif isinstance(value, dict):
                    found.extend(value.values())
            elif isinstance(value, list):
                path, wanted = step
                for item in value:
                    probe = item
                    for part in path:
                        probe = probe.get(part) if isinstance(probe, dict) else None
                    if probe is not None and _printed(probe) == wanted:
                        found.append(item)
        values = found
        if not values:
            break
    return values


def _printed(value):
    """A value as kubectl's JSONPath printer writes it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return str(value)


def _cell(kind, steps):
    def cell(row):
        values = find(row.obj, steps)
        if not values or values[0] is None:
            return None
        value = values[0]
        if kind == STRING:
            return _printed(value)
        if kind == DATE:
            return row.since(value) if isinstance(value, str) and parse_time(value) is not None \
                else None
        if kind == INTEGER:
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        if kind == NUMBER:
            return value if isinstance(value, (int, float)) and not isinstance(value, bool) \
                else None
        if kind == BOOLEAN:
            return value if isinstance(value, bool) else None
        return None
    return cell


#: What a version without columns gets (upstream's CRD defaulting).
DEFAULT_COLUMNS = ({"name": "Age", "type": DATE, "jsonPath": ".metadata.creationTimestamp"},)


def column_printer(columns):
    """
    The L{Printer} of C{additionalPrinterColumns} (already validated:
    L{parse_path} accepts each C{jsonPath} and each type is one of L{TYPES}).
    """
    printed = [name_column()]
    for column in columns or DEFAULT_COLUMNS:
        kind = column.get("type", STRING)
        if kind not in TYPES:
            kind = STRING
        printed.append(Column(column.get("name", ""), kind, column.get("description", ""),
                              _cell(kind, parse_path(column.get("jsonPath", ""))),
                              priority=column.get("priority") or 0,
                              format=column.get("format") or ""))
    return Printer(*printed)
