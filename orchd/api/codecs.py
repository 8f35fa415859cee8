# -*- test-case-name: tests.api.test_codecs -*-
"""
Bodies in and out: JSON and YAML, chosen by Content-Type and Accept.

JSON goes through orjson, the fastest encoder at hand, because every
request encodes or decodes at least one object.
"""

import re

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
    if isinstance(data, str):
        return data.count("{") + data.count("[")
    return data.count(b"{") + data.count(b"[")


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
        return value, json_duplicates(data) if duplicates else []
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


class MediaRange:
    """One entry of an Accept header: type, subtype, parameters, quality."""

    __slots__ = ("type", "subtype", "params", "quality", "order")

    def __init__(self, type, subtype, params, quality, order):
        self.type = type
        self.subtype = subtype
        self.params = params
        self.quality = quality
        self.order = order

    @property
    def full(self):
        return f"{self.type}/{self.subtype}"


def _split_outside_quotes(text, separator):
    """Split C{text} at C{separator}, except inside quoted strings."""
    if '"' not in text:
        return text.split(separator)
    parts, current, quoted, escaped = [], [], False, False
    for char in text:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def _unquote(value):
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def parse_accept(header):
    """
    The media ranges of an Accept header, best first (by q, then position).

    Parameter names are lower-cased and quoted values unquoted; an
    unreadable q counts as 0; malformed entries are skipped rather than
    failing the request.
    """
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    ranges = []
    for order, item in enumerate(_split_outside_quotes(header or "", ",")):
        pieces = _split_outside_quotes(item, ";")
        kind = pieces[0].strip().lower()
        if "/" not in kind:
            continue
        type_, subtype = kind.split("/", 1)
        params = {}
        quality = 1.0
        for piece in pieces[1:]:
            key, sep, value = piece.partition("=")
            key = key.strip().lower()
            value = _unquote(value.strip())
            if not sep or not key:
                continue
            if key == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
            else:
                params[key] = value
        ranges.append(MediaRange(type_, subtype, params, quality, order))
    ranges.sort(key=lambda r: (-r.quality, r.order))
    return ranges


# Parameters of a media range this server ignores rather than refusing on.
_HARMLESS_PARAMS = frozenset(("charset", "pretty", "stream"))


def negotiate(accept, offers=(JSON, YAML)):
    """
    Pick the response media type for an Accept header among C{offers}.

    Ranges with parameters the server does not serve (e.g. C{as=Table}
    before tables exist) are passed over, so clients fall back to plain JSON.

    @raise StatusError: 406 when nothing acceptable is on offer.
    """
    if not accept:
        return offers[0]
    for candidate in parse_accept(accept):
        if candidate.quality <= 0 or set(candidate.params) - _HARMLESS_PARAMS:
            continue
        if candidate.type == "*" and candidate.subtype == "*":
            return offers[0]
        for offer in offers:
            type_, subtype = offer.split("/")
            if candidate.type == type_ and candidate.subtype in ("*", subtype):
                return offer
    raise StatusError.not_acceptable(
        "only the following media types are accepted: " + ", ".join(offers)
    )


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
