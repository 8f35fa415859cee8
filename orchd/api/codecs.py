# -*- test-case-name: tests.api.test_codecs -*-
"""
Bodies in and out: JSON, YAML and protobuf, by media type.

Which media type an answer takes is the HTTP layer's choice, read from the
request's Accept header (L{orchd.server.negotiation}); this module only
encodes and decodes.

JSON goes through orjson, the fastest encoder at hand, because every
request encodes or decodes at least one object.
"""

import orjson
import yaml

from orchd.api import yamldecode
from orchd.api.bounded import MAX_DEPTH, within_depth
from orchd.api.errors import StatusError
from orchd.api.strictdecode import json_duplicates

JSON = "application/json"
YAML = "application/yaml"
#: [COMPAT] the media type clients name protobuf bodies with.
PROTOBUF = "application/vnd.kubernetes.protobuf"

_YamlDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

#: Media types a request body may have (patch types are the handler's).
BODY_TYPES = (JSON, YAML, "application/yml", "text/yaml", "application/x-yaml")
_YAML_TYPES = frozenset(BODY_TYPES[1:])


def dumps_json(obj, pretty=False):
    """Encode C{obj}; a trailing newline keeps line-based readers happy."""
    if pretty:
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


def dumps_yaml(obj):
    return yaml.dump(obj, Dumper=_YamlDumper, default_flow_style=False, sort_keys=False,
                     allow_unicode=True).encode("utf-8")


def loads_json(data):
    """Decode a JSON body; a malformed or too deeply nested one is the client's error (400)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise StatusError.bad_request(f"couldn't get version/kind; json parse error: {e}") from None
    # A body cannot nest deeper than it has brackets: most need no walk.
    if _brackets(data) > MAX_DEPTH and not within_depth(value):
        raise StatusError.bad_request(
            f"couldn't get version/kind; json parse error: exceeded max depth of {MAX_DEPTH}")
    return value


def _brackets(data):
    """
    How many objects and lists C{data} opens. Counting a byte reads every
    byte, finding one stops at the first: a body with no list (a config
    map's) is counted once.
    """
    curly, square = ("{", "[") if isinstance(data, str) else (b"{", b"[")
    count = data.count(curly)
    return count + data.count(square) if square in data else count


def loads_yaml(data):
    """Decode a YAML body (JSON is YAML too); malformed or refused is 400."""
    return _yaml(data)[0]


def _yaml(data):
    try:
        return yamldecode.load(data)
    except yamldecode.YAMLDecodeError as e:
        raise StatusError.bad_request(f"error converting YAML to JSON: yaml: {e}") from None


def media_type(header):
    """The bare, lower-case media type of a Content-Type value (bytes or str)."""
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    return header.split(";", 1)[0].strip().lower()


def decode(data, syntax=JSON, duplicates=False):
    """
    Decode a document of C{syntax} (L{JSON}, L{YAML} or L{PROTOBUF}), bounded
    in depth and, for YAML, in alias expansion.

    @param duplicates: also find keys repeated within one object.
    @return: C{(value, paths of repeated keys)}.
    @raise StatusError: 400 for a malformed or refused document.
    """
    if syntax == JSON:
        value = loads_json(data)
        return value, json_duplicates(data, value) if duplicates else []
    if syntax == YAML:
        value, repeated = _yaml(data)
        return value, repeated if duplicates else []
    value = _protobuf().decode(data)
    if not within_depth(value):
        raise StatusError.bad_request(f"the object nests deeper than {MAX_DEPTH} levels")
    return value, []


def body_syntax(content_type):
    """
    The syntax of a request body by its Content-Type; a missing one is JSON,
    the API's native form.

    @raise StatusError: 415 for a media type the API does not read.
    """
    kind = media_type(content_type) if content_type else JSON
    if kind == JSON or kind == PROTOBUF:
        return kind
    if kind in _YAML_TYPES:
        return YAML
    raise StatusError.unsupported_media_type(kind, (JSON, YAML, PROTOBUF))


def decode_body(content_type, data):
    """
    Decode a request body into a dict by its Content-Type.

    @raise StatusError: 415 for a media type the API does not read, 400 for
        a malformed body or one that is not an object.
    """
    return must_be_object(decode(data, body_syntax(content_type))[0])


def must_be_object(obj):
    if not isinstance(obj, dict):
        raise StatusError.bad_request("the body of the request must be an object")
    return obj


def encode(obj, media, pretty=False, stored=False):
    """
    Encode a response body in the negotiated media type.

    @param stored: True when C{obj} is an object exactly as stored (a read),
        whose encoding may be reused.
    """
    if media == YAML:
        return dumps_yaml(obj)
    if media == PROTOBUF:
        codec = _protobuf()
        return codec.encode_stored(obj) if stored else codec.encode(obj)
    return dumps_json(obj, pretty)


_protobuf_codec = None


def _protobuf():
    global _protobuf_codec
    if _protobuf_codec is None:
        # Imported on first use: the message definitions take a moment to build.
        from orchd.api.proto.envelope import codec

        _protobuf_codec = codec()
    return _protobuf_codec
