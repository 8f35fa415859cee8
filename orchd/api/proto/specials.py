# -*- test-case-name: tests.api.test_proto -*-
"""
Messages whose JSON form is not an object of their fields.

Times are RFC 3339 strings, durations Go duration strings, int-or-string
either, quantities strings, raw extensions and field sets embedded JSON;
an extra value is a bare list; the schema types of custom resource
definitions are "this or that" values.
"""

import calendar
import functools
import re
import time

import orjson

TIME = "orch.meta.v1.Time"
MICRO_TIME = "orch.meta.v1.MicroTime"
DURATION = "orch.meta.v1.Duration"
FIELDS = "orch.meta.v1.FieldsV1"
RAW = "orch.runtime.RawExtension"
INT_OR_STRING = "orch.util.intstr.IntOrString"
QUANTITY = "orch.resource.Quantity"
EXTRA = "ExtraValue"
JSON = "orch.api.apiextensions.v1.JSON"
OR_ARRAY = "orch.api.apiextensions.v1.JSONSchemaPropsOrArray"
OR_BOOL = "orch.api.apiextensions.v1.JSONSchemaPropsOrBool"
OR_STRINGS = "orch.api.apiextensions.v1.JSONSchemaPropsOrStringArray"
_NAMED = frozenset((TIME, MICRO_TIME, DURATION, FIELDS, RAW, INT_OR_STRING, QUANTITY, JSON,
                    OR_ARRAY, OR_BOOL, OR_STRINGS))


class WrongType(Exception):
    """
    A JSON value of the wrong type; the path to it is collected on the way up.

    @ivar path: JSON keys (and C{[i]} indices) from the top down.
    """

    def __init__(self, expected):
        super().__init__(expected)
        self.expected = expected
        self.path = []

    def where(self):
        text = ""
        for part in self.path:
            text += part if part.startswith("[") else ("." + part if text else part)
        return text or "object"


def special_name(full_name):
    """The special form of message C{full_name}, or None for an ordinary message."""
    if full_name in _NAMED:
        return full_name
    if full_name.endswith("." + EXTRA):
        return EXTRA
    return None


def write(message, name, value, converter):
    """Fill C{message} (of special form C{name}) from its JSON C{value}."""
    if name in (TIME, MICRO_TIME):
        message.seconds, message.nanos = parse_time(value)
    elif name == INT_OR_STRING:
        if type(value) is int:
            message.type = 0
            message.intVal = value
        elif type(value) is str:
            message.type = 1
            message.strVal = value
        else:
            raise WrongType("an integer or a string")
    elif name == QUANTITY:
        if type(value) is str:
            message.string = value
        elif type(value) in (int, float):
            message.string = _number_text(value)
        else:
            raise WrongType("a quantity")
    elif name == DURATION:
        message.duration = parse_duration(value)
    elif name == FIELDS:
        message.Raw = orjson.dumps(value)
    elif name in (RAW, JSON):
        message.raw = orjson.dumps(value)
    elif name == EXTRA:
        if type(value) is not list:
            raise WrongType("a list of strings")
        message.items.extend(value)
    else:
        _write_either(message, name, value, converter)
    message.SetInParent()


def _write_either(message, name, value, converter):
    if type(value) is dict:
        converter.fill(message.schema, value)
        message.schema.SetInParent()
        if name == OR_BOOL:
            message.allows = True
    elif name == OR_BOOL and type(value) is bool:
        message.allows = value
    elif name == OR_ARRAY and type(value) is list:
        for index, item in enumerate(value):
            try:
                converter.fill(message.jSONSchemas.add(), item)
            except WrongType as e:
                e.path.insert(0, f"[{index}]")
                raise
    elif name == OR_STRINGS and type(value) is list:
        message.property.extend(value)
    else:
        raise WrongType("an object or its alternative form")


def read(message, name, converter):
    """The JSON value of C{message} (of special form C{name}); None for an empty one."""
    if name in (TIME, MICRO_TIME):
        seconds, nanos = message.seconds, message.nanos
        if not seconds and not nanos:
            return None
        text = second_text(seconds)
        return f"{text}.{nanos // 1000:06d}Z" if name == MICRO_TIME else text + "Z"
    if name == INT_OR_STRING:
        return message.strVal if message.type == 1 else message.intVal
    if name == QUANTITY:
        return message.string
    if name == DURATION:
        return duration_text(message.duration)
    if name == EXTRA:
        return list(message.items)
    if name == OR_BOOL:
        return converter.read(message.schema) if message.HasField("schema") else message.allows
    if name == OR_ARRAY:
        if message.jSONSchemas:
            return [converter.read(item) for item in message.jSONSchemas]
        return converter.read(message.schema)
    if name == OR_STRINGS:
        return list(message.property) if message.property else converter.read(message.schema)
    raw = message.Raw if name == FIELDS else message.raw
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise WrongType("embedded JSON") from None


# -- times and durations ----------------------------------------------------

_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?"
                      r"([Zz]|[+-]\d\d:\d\d)\Z")
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|ms|s|m|h)")
_UNIT_NANOS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
               "m": 60_000_000_000, "h": 3_600_000_000_000}


@functools.lru_cache(maxsize=4096)
def second_text(seconds):
    """RFC 3339 to the second; objects repeat a few timestamps, so each is formatted once."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


@functools.lru_cache(maxsize=4096)
def _parse_time(value):
    match = _RFC3339.match(value)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    seconds = calendar.timegm((int(year), int(month), int(day), int(hour), int(minute),
                               int(second), 0, 0, 0))
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    nanos = int((fraction[1:] + "000000000")[:9]) if fraction else 0
    return seconds, nanos


def parse_time(value):
    """C{(seconds, nanos)} of an RFC 3339 time."""
    parsed = _parse_time(value) if type(value) is str else None
    if parsed is None:
        raise WrongType("an RFC 3339 time")
    return parsed


def parse_duration(value):
    """Nanoseconds of a Go duration string (C{1h2m3.5s}, C{-250ms}, C{0})."""
    if type(value) is not str:
        raise WrongType("a duration such as 1m30s")
    text, sign = value, 1
    if text[:1] in "+-":
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return 0
    if not text:
        raise WrongType("a duration such as 1m30s")
    total, position = 0, 0
    while position < len(text):
        match = _DURATION_PART.match(text, position)
        if match is None:
            raise WrongType("a duration such as 1m30s")
        total += round(float(match.group(1)) * _UNIT_NANOS[match.group(2)])
        position = match.end()
    return sign * total


def duration_text(nanos):
    """Go's time.Duration.String: C{1h2m3.5s}, C{250ms}, C{0s}."""
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("\u00b5s", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _trim(nanos / size) + unit
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = f"{hours}h" if hours else ""
    if hours or minutes:
        text += f"{minutes}m"
    return sign + text + _trim(rest / 1_000_000_000) + "s"


def _trim(number):
    text = f"{number:.9f}".rstrip("0").rstrip(".")
    return text or "0"


def _number_text(value):
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)
