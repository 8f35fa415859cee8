# -*- test-case-name: tests.api.test_proto -*-
"""
Objects (JSON-shaped dicts) to protobuf messages and back.

The rest of the server only ever sees the dicts; this module maps them on
the messages field by field. Each field of each message type gets, once,
a writer and a reader chosen for its shape (scalar, bytes, message, special
form, list, map, inlined), so converting is one call per field present.
On the way back, zero scalars and empty lists and maps are left out unless
the field keeps its zero (see L{orchd.api.proto.parser}), as the upstream
JSON encoding leaves them out. Special JSON forms are in
L{orchd.api.proto.specials}.
"""

import base64
import binascii

from google.protobuf.descriptor import FieldDescriptor

from orchd.api.errors import StatusError
from orchd.api.proto import specials
from orchd.api.proto.specials import WrongType

# The shape of a field's values.
SCALAR, BYTES, MESSAGE, SPECIAL = range(4)
_EXPECTED = {SCALAR: "a value of the field's type", BYTES: "a base64 string",
             MESSAGE: "an object", SPECIAL: "a value of the field's type"}
_TYPE_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_TYPE_BYTES = FieldDescriptor.TYPE_BYTES
_SCALAR_NAMES = {
    FieldDescriptor.TYPE_INT64: "int64", FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_UINT64: "uint64", FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_BOOL: "bool", FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_DOUBLE: "double", FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_BYTES: "bytes",
}
_INTEGERS = frozenset(("int64", "int32", "uint64", "uint32"))


class _Field:
    """
    How one field of a message is read and written.

    @ivar write: C{write(message, json_value)}.
    @ivar read: C{read(value, out)} puts the field's JSON into C{out}.
    @ivar via: the embedded message fields leading to this one (inlined fields).
    """

    __slots__ = ("name", "json", "shape", "repeated", "is_map", "plan", "special", "keep",
                 "scalar_type", "via", "inline", "write", "read")

    def __init__(self, name, json):
        self.name = name
        self.json = json
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

    # -- public -------------------------------------------------------------

    def to_message(self, obj, cls):
        """A new message of C{cls} holding C{obj} (fields the message lacks are dropped)."""
        message = cls()
        try:
            self.fill(message, obj)
        except WrongType as e:
            raise StatusError.bad_request(f"{e.where()}: expected {e.expected}") from None
        return message

    def to_dict(self, message):
        """The JSON-shaped dict of C{message}."""
        try:
            return self.read(message)
        except WrongType as e:
            raise StatusError.bad_request(f"{e.where()}: not valid {e.expected}") from None
        except UnicodeDecodeError:
            # A map whose string keys are not UTF-8 fails as it is iterated.
            raise StatusError.bad_request("a map key is not valid UTF-8 text") from None

    def fill(self, message, obj):
        """Set the fields of C{message} from the JSON object C{obj}."""
        if type(obj) is not dict:
            raise WrongType("an object")
        by_json = self._plan(message.DESCRIPTOR).by_json
        for key, value in obj.items():
            field = by_json.get(key)
            if field is None or value is None:
                continue
            try:
                field.write(message, value)
            except WrongType as e:
                e.path.insert(0, key)
                raise
            except (TypeError, ValueError):
                error = WrongType(_EXPECTED[field.shape])
                error.path.append(key)
                raise error from None

    def read(self, message):
        """The JSON object of C{message}."""
        out = {}
        by_number = self._plan(message.DESCRIPTOR).by_number
        for fd, value in message.ListFields():
            by_number[fd.number].read(value, out)
        return out

    # -- plans --------------------------------------------------------------

    def _plan(self, descriptor):
        plan = self._plans.get(descriptor.full_name)
        if plan is not None:
            return plan
        plan = self._plans[descriptor.full_name] = _Plan()
        plan.full_name = descriptor.full_name
        plan.by_json, plan.by_number = {}, {}
        full_name = descriptor.full_name
        keep = self._schema.keep.get(full_name, ())
        inline = self._schema.inline.get(full_name, ())
        renamed = self._schema.json_names.get(full_name, {})
        for fd in descriptor.fields:
            field = _Field(fd.name, renamed.get(fd.name, fd.name))
            field.keep = fd.name in keep
            field.repeated = fd.is_repeated
            field.is_map = bool(fd.message_type and fd.message_type.GetOptions().map_entry)
            target = fd.message_type.fields_by_name["value"] if field.is_map else fd
            field.scalar_type = _SCALAR_NAMES.get(target.type)
            field.shape, field.special, field.plan = self._shape(target)
            field.inline = fd.name in inline and field.shape == MESSAGE
            field.write = self._writer(field)
            field.read = self._reader(field)
            plan.by_number[fd.number] = field
            if field.inline:
                # Its fields are the enclosing object's: written through it.
                for json, inner in field.plan.by_json.items():
                    plan.by_json.setdefault(json, _through(fd.name, inner))
            else:
                plan.by_json[field.json] = field
        return plan

    def _shape(self, fd):
        if fd.type == _TYPE_MESSAGE:
            special = specials.special_name(fd.message_type.full_name)
            if special is not None:
                return SPECIAL, special, None
            return MESSAGE, None, self._plan(fd.message_type)
        if fd.type == _TYPE_BYTES:
            return BYTES, None, None
        return SCALAR, None, None

    def _writer(self, field):
        """The function that sets C{field} on a message from its JSON value."""
        name, shape = field.name, field.shape
        single = self._single_writer(field)
        if field.is_map:
            def write(message, value):
                if type(value) is not dict:
                    raise WrongType("an object")
                target = getattr(message, name)
                for key, item in value.items():
                    if item is not None:
                        try:
                            single(target, key, item)
                        except WrongType as e:
                            e.path.insert(0, key)
                            raise
            return write
        if field.repeated:
            if shape == SCALAR and field.scalar_type not in _INTEGERS:
                def write(message, value):
                    if type(value) is not list:
                        raise WrongType("a list")
                    getattr(message, name).extend(value)  # checked by the message, in C
                return write

            def write(message, value):
                if type(value) is not list:
                    raise WrongType("a list")
                target = getattr(message, name)
                for index, item in enumerate(value):
                    try:
                        single(target, None, item)
                    except WrongType as e:
                        e.path.insert(0, f"[{index}]")
                        raise
            return write
        if shape == MESSAGE:
            fill = self.fill

            def write(message, value):
                child = getattr(message, name)
                fill(child, value)
                child.SetInParent()
            return write
        if shape == SPECIAL:
            special = field.special

            def write(message, value):
                specials.write(getattr(message, name), special, value, self)
            return write
        if shape == BYTES:
            return lambda message, value: setattr(message, name, _bytes_in(value))
        if field.scalar_type in _INTEGERS:
            return lambda message, value: setattr(message, name, _integer_in(value))
        return lambda message, value: setattr(message, name, value)  # checked in C

    def _single_writer(self, field):
        """C{put(container, key, value)} for one element of a list or map."""
        shape = field.shape
        if shape == MESSAGE:
            fill = self.fill
            if field.is_map:
                return lambda target, key, value: fill(target[key], value)
            return lambda target, key, value: fill(target.add(), value)
        if shape == SPECIAL:
            special = field.special
            if field.is_map:
                return lambda target, key, value: specials.write(target[key], special, value,
                                                                 self)
            return lambda target, key, value: specials.write(target.add(), special, value, self)
        convert = _bytes_in if shape == BYTES else (
            _integer_in if field.scalar_type in _INTEGERS else None)
        if field.is_map:
            if convert is None:
                def put(target, key, value):
                    target[key] = value
                return put

            def put(target, key, value):
                target[key] = convert(value)
            return put
        return lambda target, key, value: target.append(convert(value) if convert else value)

    def _reader(self, field):
        """The function that puts C{field}'s JSON into the output object."""
        json, shape, keep = field.json, field.shape, field.keep
        read_message = self.read
        if field.is_map:
            if shape == MESSAGE:
                def read(value, out):
                    out[json] = {_text(k, json): read_message(v) for k, v in value.items()}
            elif shape == SPECIAL:
                special = field.special

                def read(value, out):
                    out[json] = {_text(k, json): specials.read(v, special, self)
                                 for k, v in value.items()}
            elif shape == BYTES:
                def read(value, out):
                    out[json] = {_text(k, json): _b64(v) for k, v in value.items()}
            else:
                def read(value, out):
                    out[json] = {_text(k, json): _text(v, json) for k, v in value.items()}
            return read
        if field.repeated:
            if shape == MESSAGE:
                def read(value, out):
                    out[json] = [read_message(v) for v in value]
            elif shape == SPECIAL:
                special = field.special

                def read(value, out):
                    out[json] = [specials.read(v, special, self) for v in value]
            elif shape == BYTES:
                def read(value, out):
                    out[json] = [_b64(v) for v in value]
            elif field.scalar_type == "string":
                def read(value, out):
                    out[json] = [_text(v, json) for v in value]
            else:
                def read(value, out):
                    out[json] = list(value)
            return read
        if field.inline:
            return lambda value, out: out.update(read_message(value))
        if shape == MESSAGE:
            def read(value, out):
                out[json] = read_message(value)
        elif shape == SPECIAL:
            special = field.special

            def read(value, out):
                result = specials.read(value, special, self)
                if result is not None or keep:
                    out[json] = result
        elif shape == BYTES:
            def read(value, out):
                if value or keep:
                    out[json] = _b64(value)
        elif field.scalar_type == "string":
            def read(value, out):
                if value or keep:
                    out[json] = _text(value, json)
        else:
            def read(value, out):
                if value or keep:
                    out[json] = value
        return read


def _through(name, inner):
    """C{inner} (a field of an inlined message) as written from the enclosing one."""
    field = _Field(inner.name, inner.json)
    for slot in _Field.__slots__:
        setattr(field, slot, getattr(inner, slot))
    field.via = (name,) + inner.via
    write = inner.write

    def write_through(message, value):
        child = getattr(message, name)
        child.SetInParent()
        write(child, value)
    field.write = write_through
    return field


def _text(value, json):
    """
    A string field's value, which must be text: protobuf hands proto2
    strings that are not UTF-8 over as bytes, which no JSON can carry.
    """
    if type(value) is bytes:
        error = WrongType("UTF-8 text")
        error.path.append(json)
        raise error
    return value


def _bytes_in(value):
    if type(value) is not str:
        raise WrongType("a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise WrongType("base64 data") from None


def _integer_in(value):
    """An integer as JSON decoding checks it: no booleans, no fractions."""
    kind = type(value)
    if kind is int:
        return value
    if kind is float and value.is_integer():
        return int(value)
    raise WrongType("an integer")


def _b64(value):
    return base64.b64encode(value).decode("ascii")
