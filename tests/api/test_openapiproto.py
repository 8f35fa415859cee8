"""
Tests for L{orchd.api.openapiproto}: the v2 document as gnostic's protobuf.

The bytes are read back with a minimal wire decoder written here, with the
field numbers of gnostic's C{OpenAPIv2.proto} spelled out in each test, so
the encoder's table is checked against numbers written independently.
"""

import functools
import struct

import yaml
from twisted.trial.unittest import SynchronousTestCase

from orchd.api import openapi
from orchd.api.openapiproto import encode_document
from orchd.registry.kinds.builtin import KINDS

STABLE = [k for k in KINDS if k.stage == "stable"]
POD = "io.orch.api.core.v1.Pod"
CONFIG_MAP = "io.orch.api.core.v1.ConfigMap"
CONFIG_MAP_PATH = "/api/v1/namespaces/{namespace}/configmaps/{name}"


def _varint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def fields(data):
    """Every (number, value) of a message, in wire order: ints, floats, or bytes."""
    out, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value = struct.unpack_from("<d", data, i)[0]
            i += 8
        elif wire == 2:
            size, i = _varint(data, i)
            value = data[i:i + size]
            if len(value) != size:
                raise AssertionError("truncated field")
            i += size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((number, value))
    return out


def field(data, number):
    """The values of field C{number}."""
    return [value for n, value in fields(data) if n == number]


def one(data, number):
    [value] = field(data, number)
    return value


def text(data, number):
    return one(data, number).decode("utf-8")


def named(data, number):
    """The C{Named*} entries of repeated field C{number}: name to value bytes (or None), in order."""
    entries = {}
    for entry in field(data, number):
        [value] = field(entry, 2) or [None]
        entries[text(entry, 1)] = value
    return entries


def extensions(data, number):
    """The vendor extensions (repeated C{NamedAny} C{number}), their YAML loaded."""
    return {name: yaml.safe_load(text(any_, 2)) for name, any_ in named(data, number).items()}


@functools.lru_cache(maxsize=None)
def _stable():
    """The document of the stable kinds and its bytes, made once for these tests."""
    document = openapi.openapi_v2(STABLE)
    return document, encode_document(document)


class DocumentTests(SynchronousTestCase):
    """The served document of the built-in kinds, decoded back."""

    def setUp(self):
        self.document, self.data = _stable()

    def definition(self, name):
        # Document.definitions = 9; Definitions.additional_properties = 1.
        return named(one(self.data, 9), 1)[name]

    def test_header(self):
        """Document.swagger (1) and Info (2) title (1) and version (2) carry the JSON's values."""
        self.assertEqual(text(self.data, 1), "2.0")
        info = one(self.data, 2)
        self.assertEqual(text(info, 1), self.document["info"]["title"])
        self.assertEqual(text(info, 2), self.document["info"]["version"])

    def test_every_definition_in_order(self):
        """Every definition is a NamedSchema, in the JSON's order."""
        self.assertEqual(list(named(one(self.data, 9), 1)), list(self.document["definitions"]))

    def test_pod_properties(self):
        """A Pod's properties (25) are NamedSchemas with types (22), descriptions (4) and refs (1)."""
        pod = self.definition(POD)
        expected = self.document["definitions"][POD]
        properties = named(one(pod, 25), 1)
        self.assertEqual(list(properties), list(expected["properties"]))
        metadata = properties["metadata"]
        self.assertEqual(text(metadata, 1), expected["properties"]["metadata"]["$ref"])
        self.assertEqual(text(metadata, 4), "Standard object metadata.")
        # TypeItem.value = 1: a repeated string.
        self.assertEqual(field(one(properties["apiVersion"], 22), 1), [b"string"])
        self.assertEqual(text(pod, 4) if field(pod, 4) else None, expected.get("description"))

    def test_group_version_kind_extension(self):
        """x-kubernetes-group-version-kind is a NamedAny (31) whose Any.yaml (2) is the value as YAML."""
        for name in (POD, CONFIG_MAP):
            self.assertEqual(
                extensions(self.definition(name), 31)["x-kubernetes-group-version-kind"],
                self.document["definitions"][name]["x-kubernetes-group-version-kind"])

    def test_additional_properties_schema(self):
        """ConfigMap.data's additionalProperties (21) holds its Schema as the oneof member 1."""
        data = named(one(self.definition(CONFIG_MAP), 25), 1)["data"]
        self.assertEqual(field(one(data, 22), 1), [b"object"])
        item = one(data, 21)
        self.assertEqual([n for n, _ in fields(item)], [1])
        self.assertEqual(field(one(one(item, 1), 22), 1), [b"string"])

    def test_every_extension_round_trips(self):
        """Every x- key of every definition comes back as the same value from its YAML."""
        for name, schema in self.document["definitions"].items():
            expected = {k: v for k, v in schema.items() if k.startswith("x-")}
            self.assertEqual(extensions(self.definition(name), 31), expected, name)

    def test_fields_in_number_order(self):
        """Fields are written by ascending number, as proto.Marshal writes them."""
        numbers = [n for n, _ in fields(self.definition(CONFIG_MAP))]
        self.assertEqual(numbers, sorted(numbers))

    def operation(self, method):
        # Document.paths = 8; Paths.path = 2 (NamedPathItem).
        item = named(one(self.data, 8), 2)[CONFIG_MAP_PATH]
        return item, one(item, {"get": 2, "put": 3, "patch": 8, "delete": 5}[method])

    def test_operation(self):
        """An Operation's tags (1), operationId (5), produces (6), schemes (10) and extensions (13)."""
        _, get = self.operation("get")
        expected = self.document["paths"][CONFIG_MAP_PATH]["get"]
        self.assertEqual(text(get, 5), expected["operationId"])
        self.assertEqual(field(get, 1), [t.encode() for t in expected["tags"]])
        self.assertEqual(field(get, 6), [b"application/json"])
        self.assertEqual(field(get, 10), [b"https"])
        self.assertEqual(extensions(get, 13), {
            "x-kubernetes-action": "get",
            "x-kubernetes-group-version-kind": {"group": "", "kind": "ConfigMap", "version": "v1"}})

    def test_body_and_query_parameters(self):
        """A body parameter is Parameter.body_parameter; a query one is non_body_parameter's query."""
        _, put = self.operation("put")
        body, *queries = field(put, 8)
        # ParametersItem.parameter = 1; Parameter.body_parameter = 1.
        body = one(one(body, 1), 1)
        self.assertEqual((text(body, 2), text(body, 3), one(body, 4)), ("body", "body", 1))
        self.assertEqual(text(one(body, 5), 1), f"#/definitions/{CONFIG_MAP}")
        # Parameter.non_body_parameter = 2; NonBodyParameter.query_parameter_sub_schema = 3.
        query = one(one(one(queries[0], 1), 2), 3)
        self.assertEqual((text(query, 4), text(query, 2), text(query, 6)),
                         ("dryRun", "query", "string"))
        self.assertEqual(field(query, 1), [], "a false required is not written")

    def test_path_parameters(self):
        """A path's parameters (PathItem 9) are path_parameter_sub_schemas (4), required (1)."""
        item, _ = self.operation("get")
        names = []
        for parameter in field(item, 9):
            path = one(one(one(parameter, 1), 2), 4)
            self.assertEqual((one(path, 1), text(path, 2)), (1, "path"))
            names.append(text(path, 4))
        self.assertEqual(names, ["name", "namespace"])

    def test_responses(self):
        """Responses' codes (1) are NamedResponseValues: a Response (1) with a SchemaItem schema (1)."""
        _, get = self.operation("get")
        responses = named(one(get, 9), 1)
        self.assertEqual(list(responses), ["200", "401"])
        ok = one(responses["200"], 1)
        self.assertEqual(text(ok, 1), "OK")
        self.assertEqual(text(one(one(ok, 2), 1), 1), f"#/definitions/{CONFIG_MAP}")
        self.assertEqual(field(one(responses["401"], 1), 2), [])

    def test_security(self):
        """The security requirement (12) keeps its empty scope list; the scheme (13) is an apiKey (2)."""
        [requirement] = field(self.data, 12)
        scopes = named(requirement, 1)
        self.assertEqual(scopes, {"BearerToken": b""})
        scheme = one(named(one(self.data, 13), 1)["BearerToken"], 2)
        self.assertEqual((text(scheme, 1), text(scheme, 2), text(scheme, 3)),
                         ("apiKey", "authorization", "header"))


class ShapeTests(SynchronousTestCase):
    """The shapes JSON cannot say field by field."""

    def schema(self, schema):
        """The Schema message of C{schema}, as the only definition of a document."""
        return named(one(encode_document({"definitions": {"X": schema}}), 9), 1)["X"]

    def test_additional_properties_false(self):
        """A false additionalProperties is still written, as the oneof's boolean (2) zero."""
        self.assertEqual(fields(one(self.schema({"additionalProperties": False}), 21)), [(2, 0)])
        self.assertEqual(fields(one(self.schema({"additionalProperties": True}), 21)), [(2, 1)])

    def test_items_and_type_lists(self):
        """items (23) as one schema or a list, and type (22) as a string or a list, are repeated."""
        schema = self.schema({"type": ["string", "null"], "items": {"type": "string"}})
        self.assertEqual(field(one(schema, 22), 1), [b"string", b"null"])
        [item] = field(one(schema, 23), 1)
        self.assertEqual(field(one(item, 22), 1), [b"string"])
        tuple_ = self.schema({"items": [{"format": "a"}, {"format": "b"}]})
        self.assertEqual([text(s, 2) for s in field(one(tuple_, 23), 1)], ["a", "b"])

    def test_scalars(self):
        """Doubles are fixed64 (maximum 7), int64s varints (maxLength 11), enum (20) Any YAML."""
        schema = self.schema({"maximum": 2.5, "minimum": 0, "maxLength": 300,
                              "enum": ["a", 1, None], "default": {"k": [1]}})
        self.assertEqual(one(schema, 7), 2.5)
        self.assertEqual(field(schema, 9), [], "a zero minimum is not written")
        self.assertEqual(one(schema, 11), 300)
        self.assertEqual([yaml.safe_load(text(a, 2)) for a in field(schema, 20)], ["a", 1, None])
        self.assertEqual(yaml.safe_load(text(one(schema, 5), 2)), {"k": [1]})

    def test_integers_past_the_wire(self):
        """A negative int64 is a ten-byte varint; one past 64 bits is left out (YAML still has it)."""
        schema = self.schema({"minLength": -1, "maxLength": 1 << 70, "default": 1 << 70})
        self.assertEqual(one(schema, 12), (1 << 64) - 1)
        self.assertEqual(field(schema, 11), [])
        self.assertEqual(yaml.safe_load(text(one(schema, 5), 2)), 1 << 70)

    def test_yaml_scalar_has_no_document_end(self):
        """A scalar extension's YAML is the bare value and a newline, as gnostic writes it."""
        schema = self.schema({"x-kubernetes-patch-strategy": "merge"})
        self.assertEqual(text(one(one(schema, 31), 2), 2), "merge\n")

    def test_foreign_keys_and_wrong_types_dropped(self):
        """Keys gnostic has no field for, and values of the wrong type, are left out, not fatal."""
        schema = self.schema({"nullable": True, "oneOf": [{}], "description": 5, "maxLength": "x",
                              "properties": {"a": "not a schema"}, "required": "a",
                              "additionalProperties": "no", "title": "kept"})
        self.assertEqual([n for n, _ in fields(schema)], [3, 25])
        self.assertEqual(text(schema, 3), "kept")
        self.assertEqual(named(one(schema, 25), 1), {"a": None})
        # Document.paths (8) > Paths.path (2) > NamedPathItem.name (1) only.
        self.assertEqual(encode_document({"definitions": "nope", "paths": {"/x": 5}}),
                         b"\x42\x06\x12\x04\x0a\x02/x")

    def test_oneof_values_of_the_wrong_type(self):
        """Parameters, responses and security schemes that are not objects are left out."""
        data = encode_document({"paths": {"/x": {"get": {
            "parameters": [True, 5, {"in": "cookie"}], "responses": {"200": True}}}},
            "securityDefinitions": {"s": {"type": "oauth2", "flow": "other"}, "t": []}})
        get = one(named(one(data, 8), 2)["/x"], 2)
        self.assertEqual([n for n, _ in fields(get)], [9])
        self.assertEqual(named(one(get, 9), 1), {"200": None})
        self.assertEqual(named(one(data, 13), 1), {"s": None, "t": None})

    def test_reference_parameters_and_responses(self):
        """A $ref parameter or response is the oneof's JsonReference (2), its _ref field 1."""
        data = encode_document({"paths": {"/x": {"get": {
            "parameters": [{"$ref": "#/parameters/p"}],
            "responses": {"default": {"$ref": "#/responses/r"}}}}}})
        get = one(named(one(data, 8), 2)["/x"], 2)
        self.assertEqual(text(one(one(get, 8), 2), 1), "#/parameters/p")
        self.assertEqual(text(one(named(one(get, 9), 1)["default"], 2), 1), "#/responses/r")

    def test_unicode_and_large_lengths(self):
        """Text is UTF-8 and lengths past 127 bytes take a multi-byte varint."""
        description = "é" * 200
        schema = self.schema({"description": description})
        self.assertEqual(text(schema, 4), description)


class SizeTests(SynchronousTestCase):
    """The whole document of every kind encodes."""

    def test_every_kind(self):
        """The document of every built-in kind encodes and decodes to its definitions."""
        document = openapi.openapi_v2(KINDS)
        data = encode_document(document)
        self.assertEqual(list(named(one(data, 9), 1)), list(document["definitions"]))
        self.assertEqual(list(named(one(data, 8), 2)), list(document["paths"]))
