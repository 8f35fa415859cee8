# -*- test-case-name: tests.api.test_proto -*-
"""
Objects (JSON-shaped dicts) to protobuf messages and back.

The rest of the server only ever sees the dicts; this module maps them on
the messages field by field, with the encodings the API gives some types
in JSON: times as RFC 3339 strings, durations as Go duration strings,
int-or-string as either, quantities as strings, raw extensions and field
sets as embedded JSON, bytes as base64. On the way back, zero scalars and
empty lists and maps are left out unless the field keeps its zero (see
L{orchd.api.proto.parser}), as the upstream JSON encoding leaves them out.
"""

import base64
import binascii
import calendar
import functools
import re
import time

import orjson
from google.protobuf.descriptor import FieldDescriptor

from orchd.api.errors import StatusError

_TIME = "orch.meta.v1.Time"
_MICRO_TIME = "orch.meta.v1.MicroTime"
_DURATION = "orch.meta.v1.Duration"
_FIELDS = "orch.meta.v1.FieldsV1"
_RAW = "orch.runtime.RawExtension"
_INT_OR_STRING = "orch.util.intstr.IntOrString"
_QUANTITY = "orch.resource.Quantity"
_SPECIAL = frozenset((_TIME, _MICRO_TIME, _DURATION, _FIELDS, _RAW, _INT_OR_STRING, _QUANTITY))
# Messages whose JSON form is not an object of their fields, by their upstream
# definitions: extra values are bare lists; the schema types of custom
# resources are "this or that".
_EXTRA = "ExtraValue"
_JSON = "orch.api.apiextensions.v1.JSON"
_OR_ARRAY = "orch.api.apiextensions.v1.JSONSchemaPropsOrArray"
_OR_BOOL = "orch.api.apiextensions.v1.JSONSchemaPropsOrBool"
_OR_STRINGS = "orch.api.apiextensions.v1.JSONSchemaPropsOrStringArray"
_EITHER = frozenset((_OR_ARRAY, _OR_BOOL, _OR_STRINGS))


def _special_name(full_name):
    if full_name in _SPECIAL or full_name in _EITHER or full_name == _JSON:
        return full_name
    if full_name.endswith("." + _EXTRA):
        return _EXTRA
    return None

# How a field maps: the shape of its value.
SCALAR, BYTES, MESSAGE, SPECIAL = range(4)
_TYPE_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_TYPE_BYTES = FieldDescriptor.TYPE_BYTES
_INTEGERS = frozenset((FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_INT32,
                       FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_UINT32))
_SCALAR_NAMES = {
    FieldDescriptor.TYPE_INT64: "int64", FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_UINT64: "uint64", FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_BOOL: "bool", FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_DOUBLE: "double", FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_BYTES: "bytes",
}


class _Field:
    """How one field of a message is read and written."""

    __slots__ = ("name", "json", "shape", "repeated", "is_map", "plan",
                 "special", "keep", "integer", "scalar_type", "via", "inline")

    def __init__(self, name, json):
        self.name = name
        self.json = json
        #: The embedded message fields leading to this one, for inlined fields.
        self.via = ()
        self.inline = False


class _Plan:
    __slots__ = ("full_name", "by_json", "by_number")


class Converter:
    """
    Converts with plans made once per message type.

    @param schema: the L{orchd.api.proto.schema.Schema}.
    """

    def __init__(self, schema):
        self._schema = schema
        self._plans = {}

    def _plan(self, descriptor):
        plan = self._plans.get(descriptor.full_name)
        if plan is not None:
            return plan
        plan = self._plans[descriptor.full_name] = _Plan()
        plan.full_name = descriptor.full_name
        plan.by_json, plan.by_number = {}, {}
        keep = self._schema.keep.get(descriptor.full_name, ())
        inline = self._schema.inline.get(descriptor.full_name, ())
        renamed = self._schema.json_names.get(descriptor.full_name, {})
        for fd in descriptor.fields:
            field = _Field(fd.name, renamed.get(fd.name, fd.name))
            field.keep = fd.name in keep
            field.repeated = fd.is_repeated
            field.is_map = bool(fd.message_type and fd.message_type.GetOptions().map_entry)
            target = fd
            if field.is_map:
                target = fd.message_type.fields_by_name["value"]
            field.integer = target.type in _INTEGERS
            field.scalar_type = _SCALAR_NAMES.get(target.type)
            field.shape, field.special, field.plan = self._shape(target)
            plan.by_number[fd.number] = field
            if fd.name in inline and field.shape == MESSAGE:
                # Its fields are the enclosing object's: reach them through it.
                field.inline = True
                for json, inner in field.plan.by_json.items():
                    through = _Field(inner.name, inner.json)
                    for slot in _Field.__slots__:
                        setattr(through, slot, getattr(inner, slot))
                    through.via = (fd.name,) + inner.via
                    plan.by_json.setdefault(json, through)
            else:
                plan.by_json[field.json] = field
        return plan

    def _shape(self, fd):
        if fd.type == _TYPE_MESSAGE:
            special = _special_name(fd.message_type.full_name)
            if special is not None:
                return SPECIAL, special, None
            return MESSAGE, None, self._plan(fd.message_type)
        if fd.type == _TYPE_BYTES:
            return BYTES, None, None
        return SCALAR, None, None

    # -- dict -> message ----------------------------------------------------

    def to_message(self, obj, cls):
        """A new message of C{cls} holding C{obj} (fields the message lacks are dropped)."""
        message = cls()
        self._fill(message, obj, self._plan(cls.DESCRIPTOR), "")
        return message

    def _fill(self, message, obj, plan, path):
        if not isinstance(obj, dict):
            raise _type_error(path, "an object")
        by_json = plan.by_json
        for key, value in obj.items():
            field = by_json.get(key)
            if field is None or value is None:
                continue
            target = message
            for name in field.via:
                target = getattr(target, name)
                target.SetInParent()
            try:
                self._fill_field(target, field, value, path, key)
            except (TypeError, ValueError):
                raise _type_error(_join(path, key), _EXPECTED[field.shape]) from None

    def _fill_field(self, message, field, value, path, key):
        shape = field.shape
        if field.is_map:
            if not isinstance(value, dict):
                raise _type_error(_join(path, key), "an object")
            target = getattr(message, field.name)
            if shape == SCALAR and not field.integer:
                target.update(value)  # checked by the message, in C
            elif shape == MESSAGE:
                where = _join(path, key)
                for map_key, item in value.items():
                    if item is not None:
                        self._fill(target[map_key], item, field.plan, f"{where}.{map_key}")
            elif shape == SPECIAL:
                for map_key, item in value.items():
                    if item is not None:
                        self._set_special(target[map_key], field.special, item, _join(path, key))
            else:
                for map_key, item in value.items():
                    if item is not None:
                        target[map_key] = _scalar_in(field, item, path, key)
        elif field.repeated:
            if not isinstance(value, list):
                raise _type_error(_join(path, key), "a list")
            target = getattr(message, field.name)
            if shape == MESSAGE:
                where = _join(path, key)
                for index, item in enumerate(value):
                    self._fill(target.add(), item, field.plan, f"{where}[{index}]")
            elif shape == SPECIAL:
                for item in value:
                    self._set_special(target.add(), field.special, item, _join(path, key))
            elif shape == SCALAR and not field.integer:
                target.extend(value)  # checked by the message, in C
            else:
                target.extend(_scalar_in(field, item, path, key) for item in value)
        elif shape == MESSAGE:
            child = getattr(message, field.name)
            self._fill(child, value, field.plan, _join(path, key))
            child.SetInParent()
        elif shape == SPECIAL:
            self._set_special(getattr(message, field.name), field.special, value, _join(path, key))
        elif shape == SCALAR and not field.integer:
            setattr(message, field.name, value)  # checked by the message, in C
        else:
            setattr(message, field.name, _scalar_in(field, value, path, key))

    def _set_special(self, message, name, value, where):
        if name == _EXTRA:
            if not isinstance(value, list):
                raise _type_error(where, "a list of strings")
            message.items.extend(value)
        elif name == _JSON:
            message.raw = orjson.dumps(value)
        elif name in _EITHER:
            self._set_either(message, name, value, where)
        else:
            _set_special(message, name, value, where)
        message.SetInParent()

    def _set_either(self, message, name, value, where):
        schema_field = "schema"
        if isinstance(value, dict):
            child = message.schema
            self._fill(child, value, self._plan(child.DESCRIPTOR), where)
            child.SetInParent()
            if name == _OR_BOOL:
                message.allows = True
        elif name == _OR_BOOL and isinstance(value, bool):
            message.allows = value
        elif name == _OR_ARRAY and isinstance(value, list):
            plan = self._plan(message.DESCRIPTOR.fields_by_name["jSONSchemas"].message_type)
            for index, item in enumerate(value):
                self._fill(message.jSONSchemas.add(), item, plan, f"{where}[{index}]")
        elif name == _OR_STRINGS and isinstance(value, list):
            message.property.extend(value)
        else:
            raise _type_error(where, f"an object or a {schema_field} alternative")

    def _get_special(self, message, name):
        if name == _EXTRA:
            return list(message.items)
        if name == _JSON:
            return orjson.loads(message.raw) if message.raw else None
        if name == _OR_BOOL:
            if message.HasField("schema"):
                return self._read(message.schema, self._plan(message.schema.DESCRIPTOR))
            return message.allows
        if name == _OR_ARRAY:
            if message.jSONSchemas:
                plan = self._plan(message.DESCRIPTOR.fields_by_name["jSONSchemas"].message_type)
                return [self._read(item, plan) for item in message.jSONSchemas]
            return self._read(message.schema, self._plan(message.schema.DESCRIPTOR))
        if name == _OR_STRINGS:
            if message.property:
                return list(message.property)
            return self._read(message.schema, self._plan(message.schema.DESCRIPTOR))
        return _get_special(message, name)

    # -- message -> dict ----------------------------------------------------

    def to_dict(self, message):
        """The JSON-shaped dict of C{message}."""
        return self._read(message, self._plan(message.DESCRIPTOR))

    def _read(self, message, plan):
        out = {}
        by_number = plan.by_number
        for fd, value in message.ListFields():
            field = by_number[fd.number]
            if field.is_map:
                if not value:
                    continue
                if field.shape == MESSAGE:
                    out[field.json] = {k: self._read(v, field.plan) for k, v in value.items()}
                elif field.shape == SPECIAL:
                    out[field.json] = {k: self._get_special(v, field.special) for k, v in value.items()}
                elif field.shape == BYTES:
                    out[field.json] = {k: _b64(v) for k, v in value.items()}
                else:
                    out[field.json] = dict(value)
            elif field.repeated:
                if not value:
                    continue
                if field.shape == MESSAGE:
                    out[field.json] = [self._read(v, field.plan) for v in value]
                elif field.shape == SPECIAL:
                    out[field.json] = [self._get_special(v, field.special) for v in value]
                elif field.shape == BYTES:
                    out[field.json] = [_b64(v) for v in value]
                else:
                    out[field.json] = list(value)
            elif field.inline:
                out.update(self._read(value, field.plan))
            elif field.shape == MESSAGE:
                out[field.json] = self._read(value, field.plan)
            elif field.shape == SPECIAL:
                special = self._get_special(value, field.special)
                if special is not None or field.keep:
                    out[field.json] = special
            elif field.shape == BYTES:
                if value or field.keep:
                    out[field.json] = _b64(value)
            elif value or field.keep:
                out[field.json] = value
        return out


# -- scalars ----------------------------------------------------------------

def _scalar_in(field, value, path, key):
    """A bytes or integer value checked as JSON decoding would check it."""
    if field.shape == BYTES:
        if not isinstance(value, str):
            raise _type_error(_join(path, key), "a base64 string")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise StatusError.bad_request(f"{_join(path, key)}: illegal base64 data") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise _type_error(_join(path, key), "an integer")
    return int(value)


def _join(path, key):
    """The JSON path of a field, built only for messages."""
    return f"{path}.{key}" if path else key


_EXPECTED = {SCALAR: "a value of the field's type", BYTES: "a base64 string",
             MESSAGE: "an object", SPECIAL: "a value of the field's type"}


def _b64(value):
    return base64.b64encode(value).decode("ascii")


def _type_error(where, expected):
    return StatusError.bad_request(f"{where or 'object'}: expected {expected}")


# -- special types ----------------------------------------------------------

_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?"
                      r"([Zz]|[+-]\d\d:\d\d)$")
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|ms|s|m|h)")
_UNIT_NANOS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
               "m": 60_000_000_000, "h": 3_600_000_000_000}


def _set_special(message, name, value, where):
    if name in (_TIME, _MICRO_TIME):
        seconds, nanos = _parse_time(value, where)
        message.seconds = seconds
        message.nanos = nanos
        message.SetInParent()
    elif name == _INT_OR_STRING:
        if isinstance(value, bool):
            raise _type_error(where, "an integer or a string")
        if isinstance(value, int):
            message.type = 0
            message.intVal = value
        elif isinstance(value, str):
            message.type = 1
            message.strVal = value
        else:
            raise _type_error(where, "an integer or a string")
    elif name == _QUANTITY:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise _type_error(where, "a quantity")
        message.string = value if isinstance(value, str) else _number_text(value)
    elif name == _DURATION:
        message.duration = _parse_duration(value, where)
    elif name == _FIELDS:
        message.Raw = orjson.dumps(value)
    else:  # RawExtension
        message.raw = orjson.dumps(value)


def _get_special(message, name):
    if name in (_TIME, _MICRO_TIME):
        seconds, nanos = message.seconds, message.nanos
        if not seconds and not nanos:
            return None
        text = _second_text(seconds)
        if name == _MICRO_TIME:
            return f"{text}.{nanos // 1000:06d}Z"
        return text + "Z"
    if name == _INT_OR_STRING:
        return message.strVal if message.type == 1 else message.intVal
    if name == _QUANTITY:
        return message.string
    if name == _DURATION:
        return _duration_text(message.duration)
    raw = message.Raw if name == _FIELDS else message.raw
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise StatusError.bad_request("an embedded object is not valid JSON") from None


@functools.lru_cache(maxsize=4096)
def _second_text(seconds):
    # Objects repeat a few timestamps (creation, managedFields): format each once.
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


@functools.lru_cache(maxsize=4096)
def _parse_time_cached(value):
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


def _parse_time(value, where):
    parsed = _parse_time_cached(value) if isinstance(value, str) else None
    if parsed is None:
        raise _type_error(where, "an RFC 3339 time")
    return parsed


def _parse_duration(value, where):
    if not isinstance(value, str):
        raise _type_error(where, "a duration")
    text, sign = value, 1
    if text[:1] in "+-":
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return 0
    total, position = 0, 0
    while position < len(text):
        match = _DURATION_PART.match(text, position)
        if match is None:
            raise _type_error(where, "a duration such as 1m30s")
        total += round(float(match.group(1)) * _UNIT_NANOS[match.group(2)])
        position = match.end()
    if not text:
        raise _type_error(where, "a duration such as 1m30s")
    return sign * total


def _duration_text(nanos):
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
