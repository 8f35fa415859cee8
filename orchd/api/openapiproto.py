# -*- test-case-name: tests.api.test_openapiproto -*-
"""
The Swagger 2.0 document as gnostic's C{openapi.v2.Document} protobuf.

[COMPAT] kubectl asks for C{/openapi/v2} only in this form (for C{kubectl
explain --output=plaintext-openapiv2} and for validating C{v1 List}
files). Upstream converts its JSON document with gnostic and marshals the
message; this module writes the same bytes from the JSON-shaped document
of L{orchd.api.openapi.openapi_v2}: field numbers and message shapes are
those of gnostic's C{openapiv2/OpenAPIv2.proto} (proto3).

One generic writer walks the document, driven by L{MESSAGES}: for each
message, the JSON key of each field, its number and its shape. What JSON
cannot say field by field is in a few shapes of its own: vendor
extensions (every C{x-} key, as C{NamedAny} whose C{Any.yaml} holds the
value as YAML text, as gnostic writes them), JSON objects read as ordered
C{Named*} pairs, and the C{oneof} wrappers, whose member is chosen from
the value (a parameter's C{in}, a C{$ref}, a boolean C{additionalProperties}).
As proto3 does, zero scalars are not written; messages are written
whenever the JSON has them, even empty. Keys gnostic has no field for,
and values of the wrong type, are left out rather than refused: custom
resources' schemas may carry OpenAPI 3 keywords upstream also drops from v2.
"""

import struct

import orjson
import yaml

# Wire types.
_VARINT, _FIXED64, _BYTES = 0, 1, 2

# Field shapes besides message names (which are the keys of MESSAGES).
STRING, BOOL, DOUBLE, INT64 = "string", "bool", "double", "int64"
#: A value of any JSON type, as C{Any{yaml}}.
ANY = "any"
#: Every C{x-} key of the enclosing object, as repeated C{NamedAny}.
EXTENSIONS = "extensions"

_SCALARS = frozenset((STRING, BOOL, DOUBLE, INT64))


def _fields(*rows):
    return tuple(rows)


def _named(value_shape):
    """A C{Named*} pair message: the key as C{name} (1), the value as C{value} (2)."""
    return _fields(("name", 1, STRING, False), ("value", 2, value_shape, False))


def _primitive(first, with_allow_empty=False, with_description=False):
    """
    The fields shared by C{PrimitivesItems}, C{Header} and the non-body
    parameter sub-schemas, numbered from C{first} on (the parameters put
    C{required}, C{in}, C{description}, C{name} first).
    """
    names = ["type", "format", "items", "collectionFormat", "default", "maximum",
             "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength",
             "pattern", "maxItems", "minItems", "uniqueItems", "enum", "multipleOf"]
    shapes = {"items": "PrimitivesItems", "default": ANY, "maximum": DOUBLE, "minimum": DOUBLE,
              "multipleOf": DOUBLE, "exclusiveMaximum": BOOL, "exclusiveMinimum": BOOL,
              "uniqueItems": BOOL, "maxLength": INT64, "minLength": INT64,
              "maxItems": INT64, "minItems": INT64, "enum": ANY}
    rows = []
    number = first
    if with_allow_empty:
        rows.append(("allowEmptyValue", number, BOOL, False))
        number += 1
    for name in names:
        rows.append((name, number, shapes.get(name, STRING), name == "enum"))
        number += 1
    if with_description:
        rows.append(("description", number, STRING, False))
        number += 1
    rows.append((EXTENSIONS, number, EXTENSIONS, True))
    return tuple(rows)


def _parameter_head(with_allow_empty):
    head = (("required", 1, BOOL, False), ("in", 2, STRING, False),
            ("description", 3, STRING, False), ("name", 4, STRING, False))
    return head + _primitive(5, with_allow_empty=with_allow_empty)


#: Each message: its fields as (JSON key, number, shape, repeated). A shape
#: is a scalar, L{ANY}, L{EXTENSIONS}, or another message of this table.
#: Messages whose JSON is an object of named entries have the key
#: C{"*"} (every key not starting with C{x-}); C{oneof} wrappers are in
#: L{_ONEOF}; C{TypeItem}, C{ItemsItem} and C{StringArray} take a list.
MESSAGES = {
    "Document": _fields(
        ("swagger", 1, STRING, False), ("info", 2, "Info", False), ("host", 3, STRING, False),
        ("basePath", 4, STRING, False), ("schemes", 5, STRING, True),
        ("consumes", 6, STRING, True), ("produces", 7, STRING, True),
        ("paths", 8, "Paths", False), ("definitions", 9, "Definitions", False),
        ("parameters", 10, "ParameterDefinitions", False),
        ("responses", 11, "ResponseDefinitions", False),
        ("security", 12, "SecurityRequirement", True),
        ("securityDefinitions", 13, "SecurityDefinitions", False),
        ("tags", 14, "Tag", True), ("externalDocs", 15, "ExternalDocs", False),
        (EXTENSIONS, 16, EXTENSIONS, True)),
    "Info": _fields(
        ("title", 1, STRING, False), ("version", 2, STRING, False),
        ("description", 3, STRING, False), ("termsOfService", 4, STRING, False),
        ("contact", 5, "Contact", False), ("license", 6, "License", False),
        (EXTENSIONS, 7, EXTENSIONS, True)),
    "Contact": _fields(
        ("name", 1, STRING, False), ("url", 2, STRING, False), ("email", 3, STRING, False),
        (EXTENSIONS, 4, EXTENSIONS, True)),
    "License": _fields(
        ("name", 1, STRING, False), ("url", 2, STRING, False), (EXTENSIONS, 3, EXTENSIONS, True)),
    "ExternalDocs": _fields(
        ("description", 1, STRING, False), ("url", 2, STRING, False),
        (EXTENSIONS, 3, EXTENSIONS, True)),
    "Tag": _fields(
        ("name", 1, STRING, False), ("description", 2, STRING, False),
        ("externalDocs", 3, "ExternalDocs", False), (EXTENSIONS, 4, EXTENSIONS, True)),
    "Paths": _fields((EXTENSIONS, 1, EXTENSIONS, True), ("*", 2, "NamedPathItem", True)),
    "NamedPathItem": _named("PathItem"),
    "PathItem": _fields(
        ("$ref", 1, STRING, False), ("get", 2, "Operation", False),
        ("put", 3, "Operation", False), ("post", 4, "Operation", False),
        ("delete", 5, "Operation", False), ("options", 6, "Operation", False),
        ("head", 7, "Operation", False), ("patch", 8, "Operation", False),
        ("parameters", 9, "ParametersItem", True), (EXTENSIONS, 10, EXTENSIONS, True)),
    "Operation": _fields(
        ("tags", 1, STRING, True), ("summary", 2, STRING, False),
        ("description", 3, STRING, False), ("externalDocs", 4, "ExternalDocs", False),
        ("operationId", 5, STRING, False), ("produces", 6, STRING, True),
        ("consumes", 7, STRING, True), ("parameters", 8, "ParametersItem", True),
        ("responses", 9, "Responses", False), ("schemes", 10, STRING, True),
        ("deprecated", 11, BOOL, False), ("security", 12, "SecurityRequirement", True),
        (EXTENSIONS, 13, EXTENSIONS, True)),
    "BodyParameter": _fields(
        ("description", 1, STRING, False), ("name", 2, STRING, False), ("in", 3, STRING, False),
        ("required", 4, BOOL, False), ("schema", 5, "Schema", False),
        (EXTENSIONS, 6, EXTENSIONS, True)),
    "HeaderParameterSubSchema": _parameter_head(False),
    "FormDataParameterSubSchema": _parameter_head(True),
    "QueryParameterSubSchema": _parameter_head(True),
    "PathParameterSubSchema": _parameter_head(False),
    "PrimitivesItems": _primitive(1),
    "Header": _primitive(1, with_description=True),
    "Headers": _fields(("*", 1, "NamedHeader", True)),
    "NamedHeader": _named("Header"),
    "JsonReference": _fields(("$ref", 1, STRING, False), ("description", 2, STRING, False)),
    "Responses": _fields(("*", 1, "NamedResponseValue", True), (EXTENSIONS, 2, EXTENSIONS, True)),
    "NamedResponseValue": _named("ResponseValue"),
    "Response": _fields(
        ("description", 1, STRING, False), ("schema", 2, "SchemaItem", False),
        ("headers", 3, "Headers", False), ("examples", 4, "Examples", False),
        (EXTENSIONS, 5, EXTENSIONS, True)),
    "Examples": _fields(("*", 1, "NamedAny", True)),
    "NamedAny": _named("Any"),
    "Schema": _fields(
        ("$ref", 1, STRING, False), ("format", 2, STRING, False), ("title", 3, STRING, False),
        ("description", 4, STRING, False), ("default", 5, ANY, False),
        ("multipleOf", 6, DOUBLE, False), ("maximum", 7, DOUBLE, False),
        ("exclusiveMaximum", 8, BOOL, False), ("minimum", 9, DOUBLE, False),
        ("exclusiveMinimum", 10, BOOL, False), ("maxLength", 11, INT64, False),
        ("minLength", 12, INT64, False), ("pattern", 13, STRING, False),
        ("maxItems", 14, INT64, False), ("minItems", 15, INT64, False),
        ("uniqueItems", 16, BOOL, False), ("maxProperties", 17, INT64, False),
        ("minProperties", 18, INT64, False), ("required", 19, STRING, True),
        ("enum", 20, ANY, True), ("additionalProperties", 21, "AdditionalPropertiesItem", False),
        ("type", 22, "TypeItem", False), ("items", 23, "ItemsItem", False),
        ("allOf", 24, "Schema", True), ("properties", 25, "Properties", False),
        ("discriminator", 26, STRING, False), ("readOnly", 27, BOOL, False),
        ("xml", 28, "Xml", False), ("externalDocs", 29, "ExternalDocs", False),
        ("example", 30, ANY, False), (EXTENSIONS, 31, EXTENSIONS, True)),
    "FileSchema": _fields(
        ("format", 1, STRING, False), ("title", 2, STRING, False),
        ("description", 3, STRING, False), ("default", 4, ANY, False),
        ("required", 5, STRING, True), ("type", 6, STRING, False),
        ("readOnly", 7, BOOL, False), ("externalDocs", 8, "ExternalDocs", False),
        ("example", 9, ANY, False), (EXTENSIONS, 10, EXTENSIONS, True)),
    "Xml": _fields(
        ("name", 1, STRING, False), ("namespace", 2, STRING, False), ("prefix", 3, STRING, False),
        ("attribute", 4, BOOL, False), ("wrapped", 5, BOOL, False),
        (EXTENSIONS, 6, EXTENSIONS, True)),
    "Properties": _fields(("*", 1, "NamedSchema", True)),
    "Definitions": _fields(("*", 1, "NamedSchema", True)),
    "NamedSchema": _named("Schema"),
    "ParameterDefinitions": _fields(("*", 1, "NamedParameter", True)),
    "NamedParameter": _named("Parameter"),
    "ResponseDefinitions": _fields(("*", 1, "NamedResponse", True)),
    "NamedResponse": _named("Response"),
    "SecurityRequirement": _fields(("*", 1, "NamedStringArray", True)),
    "NamedStringArray": _named("StringArray"),
    "SecurityDefinitions": _fields(("*", 1, "NamedSecurityDefinitionsItem", True)),
    "NamedSecurityDefinitionsItem": _named("SecurityDefinitionsItem"),
    "BasicAuthenticationSecurity": _fields(
        ("type", 1, STRING, False), ("description", 2, STRING, False),
        (EXTENSIONS, 3, EXTENSIONS, True)),
    "ApiKeySecurity": _fields(
        ("type", 1, STRING, False), ("name", 2, STRING, False), ("in", 3, STRING, False),
        ("description", 4, STRING, False), (EXTENSIONS, 5, EXTENSIONS, True)),
    "Oauth2ImplicitSecurity": _fields(
        ("type", 1, STRING, False), ("flow", 2, STRING, False),
        ("scopes", 3, "Oauth2Scopes", False), ("authorizationUrl", 4, STRING, False),
        ("description", 5, STRING, False), (EXTENSIONS, 6, EXTENSIONS, True)),
    "Oauth2PasswordSecurity": _fields(
        ("type", 1, STRING, False), ("flow", 2, STRING, False),
        ("scopes", 3, "Oauth2Scopes", False), ("tokenUrl", 4, STRING, False),
        ("description", 5, STRING, False), (EXTENSIONS, 6, EXTENSIONS, True)),
    "Oauth2ApplicationSecurity": _fields(
        ("type", 1, STRING, False), ("flow", 2, STRING, False),
        ("scopes", 3, "Oauth2Scopes", False), ("tokenUrl", 4, STRING, False),
        ("description", 5, STRING, False), (EXTENSIONS, 6, EXTENSIONS, True)),
    "Oauth2AccessCodeSecurity": _fields(
        ("type", 1, STRING, False), ("flow", 2, STRING, False),
        ("scopes", 3, "Oauth2Scopes", False), ("authorizationUrl", 4, STRING, False),
        ("tokenUrl", 5, STRING, False), ("description", 6, STRING, False),
        (EXTENSIONS, 7, EXTENSIONS, True)),
    "Oauth2Scopes": _fields(("*", 1, "NamedString", True)),
    "NamedString": _named(STRING),
    # Wrappers of a list (or of one value standing for a list of one).
    "TypeItem": ((None, 1, STRING, True),),
    "ItemsItem": ((None, 1, "Schema", True),),
    "StringArray": ((None, 1, STRING, True),),
}


def _on_objects(choose):
    """A chooser of members for JSON objects only (other values fit no member)."""
    return lambda value: choose(value) if type(value) is dict else None


def _parameter_member(value):
    if value.get("in") == "body":
        return 1, "BodyParameter"
    return 2, "NonBodyParameter"


_NON_BODY = {"header": (1, "HeaderParameterSubSchema"),
             "formData": (2, "FormDataParameterSubSchema"),
             "query": (3, "QueryParameterSubSchema"),
             "path": (4, "PathParameterSubSchema")}

_SECURITY = {"basic": (1, "BasicAuthenticationSecurity"), "apiKey": (2, "ApiKeySecurity")}
_OAUTH2 = {"implicit": (3, "Oauth2ImplicitSecurity"), "password": (4, "Oauth2PasswordSecurity"),
           "application": (5, "Oauth2ApplicationSecurity"),
           "accessCode": (6, "Oauth2AccessCodeSecurity")}


def _security_member(value):
    if value.get("type") == "oauth2":
        return _OAUTH2.get(value.get("flow"))
    return _SECURITY.get(value.get("type"))


def _additional_properties_member(value):
    if type(value) is bool:
        return 2, BOOL
    return (1, "Schema") if type(value) is dict else None


#: The C{oneof} wrappers: a function of the JSON value giving the number
#: and message (or L{BOOL}) of the member that holds it (None: the value
#: fits none, and the field is left out).
_ONEOF = {
    "ParametersItem": _on_objects(
        lambda v: (2, "JsonReference") if "$ref" in v else (1, "Parameter")),
    "Parameter": _on_objects(_parameter_member),
    "NonBodyParameter": _on_objects(lambda v: _NON_BODY.get(v.get("in"))),
    "ResponseValue": _on_objects(
        lambda v: (2, "JsonReference") if "$ref" in v else (1, "Response")),
    "SchemaItem": _on_objects(
        lambda v: (2, "FileSchema") if v.get("type") == "file" else (1, "Schema")),
    "SecurityDefinitionsItem": _on_objects(_security_member),
    "AdditionalPropertiesItem": _additional_properties_member,
}


# The wire -------------------------------------------------------------------------


def _varint(value):
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [bytes((n,)) for n in range(128)]
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _delimited(tag, data):
    """A length-delimited field: its tag, the length of C{data}, then C{data}."""
    size = len(data)
    return tag + (_SMALL[size] if size < 128 else _varint(size)) + data


def _tag(number, wire_type):
    return _varint((number << 3) | wire_type)


def _yaml(value):
    """The value as YAML text, as gnostic keeps an C{Any} (a scalar without an end marker)."""
    text = yaml.dump(value, Dumper=_DUMPER, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=1 << 30)
    return text.removesuffix("...\n")


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_YAML_TAG = _tag(2, _BYTES)
_NAME_TAG = _tag(1, _BYTES)      # Named*.name
_VALUE_TAG = _tag(2, _BYTES)     # Named*.value


class _Plan:
    """
    One message of the table, indexed for writing: C{keyed} maps a JSON key
    to (number, tag, shape, repeated); C{named} and C{extensions} are the
    (number, tag, value shape) of the C{"*"} and C{x-} entries, if any.
    """

    __slots__ = ("keyed", "named", "extensions", "wrapper")

    def __init__(self, messages, fields):
        self.keyed, self.named, self.extensions, self.wrapper = {}, None, None, None
        for key, number, shape, repeated in fields:
            wire = _VARINT if shape in (BOOL, INT64) else _FIXED64 if shape == DOUBLE else _BYTES
            tag = _tag(number, wire)
            if key is None:
                self.wrapper = (number, tag, shape)
            elif key == "*":
                self.named = (number, tag, messages[shape][1][2])
            elif key == EXTENSIONS:
                self.extensions = (number, tag, ANY)
            else:
                self.keyed[key] = (number, tag, shape, repeated)


class Encoder:
    """Writes JSON-shaped values as the messages of L{MESSAGES}."""

    def __init__(self, messages=MESSAGES, oneof=_ONEOF):
        self._plans = {name: _Plan(messages, fields) for name, fields in messages.items()}
        self._oneof = {name: (choose, {}) for name, choose in oneof.items()}

    def encode(self, document):
        """The bytes of C{document} (the Swagger 2.0 JSON object) as an C{openapi.v2.Document}."""
        # The document shares objects (each query parameter, each GVK) between
        # operations: their bytes are written once per encoding, keyed by the
        # identity of objects the document keeps alive until the end.
        self._done = {}
        self._yaml = {}
        try:
            return self.message("Document", document) or b""
        finally:
            self._done = self._yaml = None

    def message(self, name, value):
        """The bytes of message C{name} holding the JSON C{value} (None if it does not fit)."""
        oneof = self._oneof.get(name)
        if oneof is not None:
            return self._member(oneof, value)
        plan = self._plans[name]
        if plan.wrapper is not None:
            # A wrapper of a list: one value counts as a list of one.
            _, tag, shape = plan.wrapper
            items = value if type(value) is list else [value]
            return b"".join(self._value(tag, shape, item) for item in items)
        if type(value) is not dict:
            return None
        key = (name, id(value))
        data = self._done.get(key)
        if data is None:
            data = self._done[key] = self._fields(plan, value)
        return data

    def _fields(self, plan, value):
        parts = []
        keyed, named, extensions = plan.keyed, plan.named, plan.extensions
        for key, item in value.items():
            row = keyed.get(key)
            if row is not None:
                number, tag, shape, repeated = row
                if not repeated:
                    data = self._value(tag, shape, item)
                elif type(item) is list:
                    data = b"".join([self._value(tag, shape, each) for each in item])
                else:
                    continue
            elif key[:2] == "x-":
                if extensions is None:
                    continue
                number, tag, shape = extensions
                data = self._pair(tag, shape, key, item)
            elif named is not None:
                number, tag, shape = named
                data = self._pair(tag, shape, key, item)
            else:
                continue
            if data:
                parts.append((number, data))
        # proto.Marshal writes fields by number; entries of one field keep their order.
        parts.sort(key=_first)
        return b"".join([data for _, data in parts])

    def _member(self, oneof, value):
        choose, tags = oneof
        member = choose(value)
        if member is None:
            return None
        number, inner = member
        tag = tags.get(number)
        if tag is None:
            tag = tags[number] = _tag(number, _VARINT if inner == BOOL else _BYTES)
        if inner == BOOL:
            # A oneof member is written even when it is the zero value.
            return tag + (b"\x01" if value else b"\x00")
        data = self.message(inner, value)
        return None if data is None else _delimited(tag, data)

    def _pair(self, tag, shape, name, item):
        """A C{Named*} entry: the key as C{name} (1), the value as C{value} (2)."""
        inner = _delimited(_NAME_TAG, name.encode("utf-8")) if name else b""
        return _delimited(tag, inner + self._value(_VALUE_TAG, shape, item))

    def _value(self, tag, shape, value):
        if shape == STRING:
            if type(value) is not str or not value:
                return b""
            return _delimited(tag, value.encode("utf-8"))
        if shape == BOOL:
            return tag + b"\x01" if value is True else b""
        if shape == INT64:
            if type(value) is not int or not value or not _INT64_MIN <= value <= _INT64_MAX:
                return b""
            return tag + _varint(value)
        if shape == DOUBLE:
            if type(value) not in (int, float) or not value:
                return b""
            return tag + struct.pack("<d", value)
        if shape == ANY or shape == "Any":
            try:
                key = orjson.dumps(value)
            except (TypeError, orjson.JSONEncodeError):
                key = None      # an integer past 64 bits: YAML still writes it
            any_ = self._yaml.get(key)
            if any_ is None:
                any_ = _delimited(_YAML_TAG, _yaml(value).encode("utf-8"))
                if key is not None:
                    self._yaml[key] = any_
            return _delimited(tag, any_)
        data = self.message(shape, value)
        return b"" if data is None else _delimited(tag, data)


def _first(part):
    return part[0]


def encode_document(document):
    """The protobuf bytes of an L{orchd.api.openapi.openapi_v2} document."""
    return Encoder().encode(document)
