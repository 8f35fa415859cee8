# -*- test-case-name: tests.api.test_proto -*-
"""
Reads the project's own .proto files into descriptors the protobuf package builds.

The files (in C{orchd/api/proto/defs/}) hold the wire facts of every message
(field numbers and types, as the upstream API defines them) in a small
subset of proto2 that C{protoc} also compiles, so tests can check our
decoding against an independent encoder:

    syntax = "proto2";
    package orch.api.core.v1;
    import "orch/meta/v1.proto";

    message ConfigMap {
      optional orch.meta.v1.ObjectMeta metadata = 1;
      map<string, string> data = 2;
      map<string, bytes> binaryData = 3;
      optional bool immutable = 4; // keep
    }

Fields are C{optional}, C{repeated} or C{map<K, V>}; types are proto scalars
or message names (qualified with their package, or local to the file); a
field's JSON name is the proto name unless C{[json_name = "..."]} says
otherwise. The trailing C{// keep} marks a field whose zero value stays in
JSON (a pointer or a field without C{omitempty} upstream); any other zero
scalar, empty list or empty map decoded from the wire is left out of the
JSON object, as the upstream JSON encoding leaves it out. The trailing
C{// inline} marks a message field whose own fields sit in the enclosing
JSON object (an embedded struct upstream, such as a volume's source).
Other comments are ignored.
"""

import re

from google.protobuf import descriptor_pb2

_SCALARS = {
    "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
    "float": descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "uint64": descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "uint32": descriptor_pb2.FieldDescriptorProto.TYPE_UINT32,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
}
_OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
_REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
_MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE

_COMMENT = re.compile(r"//[^\n]*")
_FIELD = re.compile(
    r"^(?:(optional|repeated)\s+([\w.]+)|map\s*<\s*(\w+)\s*,\s*([\w.]+)\s*>)\s+(\w+)\s*=\s*(\d+)"
    r"\s*(?:\[\s*json_name\s*=\s*\"([^\"]*)\"\s*\])?\s*;\s*(//.*)?$")


class ProtoSyntaxError(ValueError):
    """A definition file is not in the subset this parser reads."""


class ParsedFile:
    """
    One definition file: its descriptor, and what JSON needs beyond it.

    @ivar keep: C{{"pkg.Message": {"field", ...}}}: fields whose zero stays.
    @ivar inline: C{{"pkg.Message": {"field", ...}}}: embedded message fields.
    @ivar json_names: C{{"pkg.Message": {"field": "jsonName"}}} when they differ.
    """

    def __init__(self, proto, keep, inline, json_names):
        self.proto = proto
        self.keep = keep
        self.inline = inline
        self.json_names = json_names


def parse(name, text):
    """
    Parse definition C{text} (from file C{name}) into a L{ParsedFile}.

    Message references are left as written and resolved against the
    package and imports here, so the pool can link files in any order.

    @raise ProtoSyntaxError: on anything outside the subset.
    """
    proto = descriptor_pb2.FileDescriptorProto(name=name, syntax="proto2")
    keep, inline, json_names = {}, {}, {}
    lines = text.split("\n")
    package = ""
    messages = []
    current = None
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        code = _COMMENT.sub("", line).strip()
        if not code:
            continue
        if current is None:
            if code.startswith("syntax"):
                if '"proto2"' not in code:
                    raise ProtoSyntaxError(f"{name}:{number}: only proto2 is read")
            elif code.startswith("package "):
                package = code[len("package "):].rstrip(";").strip()
                proto.package = package
            elif code.startswith("import "):
                proto.dependency.append(code[len("import "):].rstrip(";").strip().strip('"'))
            elif code.startswith("message ") and code.endswith("{"):
                message_name = code[len("message "):-1].strip()
                current = proto.message_type.add(name=message_name)
                messages.append(current)
            elif code.startswith("option "):
                continue
            else:
                raise ProtoSyntaxError(f"{name}:{number}: unexpected {code!r}")
            continue
        if code == "}":
            current = None
            continue
        match = _FIELD.match(line)
        if match is None:
            raise ProtoSyntaxError(f"{name}:{number}: unreadable field {line!r}")
        label, type_name, key_type, value_type, field_name, field_number, json_name, comment = \
            match.groups()
        full = f"{package}.{current.name}"
        marker = comment[2:].strip().split()[:1] if comment else []
        if marker == ["keep"]:
            keep.setdefault(full, set()).add(field_name)
        elif marker == ["inline"]:
            inline.setdefault(full, set()).add(field_name)
        if json_name is not None and json_name != field_name:
            json_names.setdefault(full, {})[field_name] = json_name
        field = current.field.add(name=field_name, number=int(field_number),
                                  json_name=json_name or field_name)
        if key_type is not None:
            entry_name = _map_entry_name(field_name)
            entry = current.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            _set_type(entry.field.add(name="key", number=1, label=_OPTIONAL), key_type, name)
            _set_type(entry.field.add(name="value", number=2, label=_OPTIONAL), value_type, name)
            field.label = _REPEATED
            field.type = _MESSAGE
            field.type_name = f"{full}.{entry_name}"
        else:
            field.label = _REPEATED if label == "repeated" else _OPTIONAL
            _set_type(field, type_name, name)
    if current is not None:
        raise ProtoSyntaxError(f"{name}: message {current.name} is not closed")
    return ParsedFile(proto, keep, inline, json_names)


def _set_type(field, type_name, file_name):
    scalar = _SCALARS.get(type_name)
    if scalar is not None:
        field.type = scalar
    else:
        field.type = _MESSAGE
        field.type_name = type_name


def _map_entry_name(field_name):
    """protoc's name for a map field's entry message: C{binaryData} -> C{BinaryDataEntry}."""
    return "".join(part[:1].upper() + part[1:] for part in field_name.split("_")) + "Entry"


def resolve(parsed_files):
    """
    Qualify every message reference: names of the file's own package win,
    then names of imported packages, as protoc resolves them.

    @raise ProtoSyntaxError: for a name defined nowhere.
    """
    defined = {}
    for parsed in parsed_files:
        package = parsed.proto.package
        for message in parsed.proto.message_type:
            defined[f"{package}.{message.name}"] = parsed.proto.name
    by_name = {parsed.proto.name: parsed for parsed in parsed_files}
    for parsed in parsed_files:
        proto = parsed.proto
        packages = [proto.package] + [
            by_name[dep].proto.package for dep in proto.dependency if dep in by_name]
        for message in proto.message_type:
            for field in _all_fields(message):
                if field.type != _MESSAGE or field.type_name.startswith("."):
                    continue
                field.type_name = "." + _qualify(field.type_name, packages, defined, proto.name)


def _all_fields(message):
    yield from message.field
    for nested in message.nested_type:
        yield from nested.field


def _qualify(name, packages, defined, file_name):
    if name in defined or name.rsplit(".", 1)[0] and _is_entry(name, defined):
        return name
    for package in packages:
        candidate = f"{package}.{name}"
        if candidate in defined:
            return candidate
    raise ProtoSyntaxError(f"{file_name}: unknown message type {name!r}")


def _is_entry(name, defined):
    """Map entry messages are nested: C{pkg.Message.FieldEntry}."""
    return name.endswith("Entry") and name.rsplit(".", 1)[0] in defined
