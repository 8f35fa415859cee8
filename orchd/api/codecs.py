# -*- test-case-name: tests.api.test_codecs -*-
"""
Bodies in and out: JSON and YAML, chosen by Content-Type and Accept.

JSON goes through orjson, the fastest encoder at hand, because every
request encodes or decodes at least one object.
"""

import re

import orjson
import yaml

from orchd.api.errors import StatusError

JSON = "application/json"
YAML = "application/yaml"
#: [COMPAT] the media type clients name protobuf bodies with.
PROTOBUF = "application/vnd.kubernetes.protobuf"

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YamlDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _YamlLoader(_BaseLoader):
    """
    Safe YAML that reads timestamps as strings, as JSON would carry them.

    API objects hold times as RFC 3339 strings; letting YAML turn them into
    datetimes would change the object on its way through the server.
    """


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}

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
    """Decode a JSON body; a malformed one is the client's error (400)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise StatusError.bad_request(f"couldn't get version/kind; json parse error: {e}") from None


def loads_yaml(data):
    """Decode a YAML body (JSON is YAML too); malformed is 400."""
    try:
        return _json_shaped(yaml.load(data, Loader=_YamlLoader))
    except yaml.YAMLError as e:
        message = " ".join(str(e).split())
        raise StatusError.bad_request(f"error converting YAML to JSON: {message}") from None


def _json_shaped(value):
    """Make YAML's richer values JSON's: map keys become strings, bytes are refused."""
    if isinstance(value, dict):
        return {_json_key(k): _json_shaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_shaped(v) for v in value]
    if isinstance(value, (bytes, set)):
        raise StatusError.bad_request("error converting YAML to JSON: unsupported YAML value")
    return value


def _json_key(key):
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def media_type(header):
    """The bare, lower-case media type of a Content-Type value (bytes or str)."""
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    return header.split(";", 1)[0].strip().lower()


def decode_body(content_type, data):
    """
    Decode a request body into a dict by its Content-Type.

    A missing Content-Type is read as JSON, the API's native form.

    @raise StatusError: 415 for a media type the API does not read, 400 for
        a malformed body or one that is not an object.
    """
    kind = media_type(content_type) if content_type else JSON
    if kind == JSON:
        obj = loads_json(data)
    elif kind in _YAML_TYPES:
        obj = loads_yaml(data)
    elif kind == PROTOBUF:
        obj = _protobuf().decode(data)
    else:
        raise StatusError.unsupported_media_type(kind, (JSON, YAML, PROTOBUF))
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
