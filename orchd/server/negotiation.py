# -*- test-case-name: tests.server.test_negotiation -*-
"""
The response format a request asks for in its Accept header.

The header is read here (L{parse_accept}), in the HTTP layer: the object
model below (L{orchd.api.codecs}) only encodes and decodes.

JSON, YAML (for answers that are not streams), protobuf for kinds that
have a message, or a server-side printing Table when kubectl asks for one.
Watches get an encoder of event frames from the same choice
(L{orchd.server.watchframes}); watchers whose encoders share a C{key}
share the frames of a change, so each change is encoded once per format.
"""

import re

from orchd.api import codecs, discovery, tables
from orchd.api.errors import StatusError
from orchd.api.query import query_text
from orchd.server.watchframes import JSONFrames, ProtobufFrames, TableFrames

#: The ranges of an Accept header that name JSON.
JSON_RANGES = ("application/json", "application/*", "*/*")
#: Parameters of a media range this server ignores rather than refusing on.
_HARMLESS = frozenset(("charset", "pretty", "stream"))


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


def negotiate(accept, offers=(codecs.JSON, codecs.YAML)):
    """
    Pick the response media type for an Accept header among C{offers}.

    Ranges with parameters the server does not serve (e.g. C{as=Table}
    before tables exist) are passed over, so clients fall back to plain JSON.

    @raise StatusError: 406 when nothing acceptable is on offer.
    """
    if not accept:
        return offers[0]
    for candidate in parse_accept(accept):
        if candidate.quality <= 0 or set(candidate.params) - _HARMLESS:
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


def wants_aggregated(accept_header):
    """
    Whether a discovery request at C{/api} or C{/apis} gets the aggregated
    document (L{orchd.api.discovery.AGGREGATED_MEDIA_TYPE}) rather than the
    legacy one.

    True when a JSON range asks for C{as=APIGroupDiscoveryList} with
    C{g=apidiscovery.k8s.io} and C{v=v2} (any parameter order, extra
    parameters such as C{profile} ignored) at a quality no lower than that
    of plain JSON. Only C{v2} is served: a client that accepts only
    C{v2beta1} gets the legacy document, which every client understands.
    """
    best_aggregated = best_legacy = 0.0
    for media_range in parse_accept(accept_header):
        params, q = media_range.params, media_range.quality
        if media_range.full not in JSON_RANGES:
            continue
        if not ({"as", "g", "v"} & params.keys()):
            best_legacy = max(best_legacy, q)
        elif (params.get("g") == discovery.AGGREGATED_DISCOVERY_GROUP
              and params.get("v") == discovery.AGGREGATED_DISCOVERY_VERSION
              and params.get("as") == discovery.AGGREGATED_DISCOVERY_KIND):
            best_aggregated = max(best_aggregated, q)
    return best_aggregated > 0 and best_aggregated >= best_legacy


class Format:
    """
    A chosen response format.

    @ivar media: the media type written in Content-Type (bytes).
    @ivar table: the Table version, or None for the object itself.
    """

    __slots__ = ("media", "codec", "table", "include_object")

    def __init__(self, media, codec, table=None, include_object=None):
        self.media = media
        self.codec = codec
        self.table = table
        self.include_object = include_object


#: The format of a request without an Accept header.
_PLAIN_JSON = Format(b"application/json", codecs.JSON)
#: Formats chosen before, by (Accept header, offers): a client sends the
#: same header with each request. Bounded in entries and header length, so
#: that headers made up per request only fill it once.
_CHOSEN = {}
_MAX_CHOSEN = 256
_MAX_CHOSEN_HEADER = 256


def choose(request, allow_yaml=True, info=None):
    """
    The best format of the Accept header that this server serves.

    Ranges with parameters it does not know (other C{as=} conversions) are
    passed over, as upstream passes them, so clients fall back. The choice
    depends on the header and the offers alone, except a Table's (which
    reads the query too): any other is kept for the next request.

    @param info: the resource's L{KindInfo}; protobuf is offered when its
        kind has a message (looked up only if the header names protobuf).
    @raise StatusError: 406 when nothing acceptable is on offer.
    """
    accept = request.getHeader(b"accept")
    if not accept:
        return _PLAIN_JSON
    offers = (codecs.JSON, codecs.YAML) if allow_yaml else (codecs.JSON,)
    if info is not None and b"protobuf" in accept and has_protobuf(info):
        offers += (codecs.PROTOBUF,)
    chosen = _CHOSEN.get((accept, offers))
    if chosen is not None:
        return chosen
    for candidate in parse_accept(accept):
        if candidate.quality <= 0:
            continue
        params = candidate.params
        if "as" in params:
            version = tables.wants_table(params)
            if version is not None and candidate.full in JSON_RANGES:
                include = tables.validate_include_object(
                    query_text(request.args, "includeObject", None))
                return Format(tables.table_media_type(version).encode("ascii"), codecs.JSON,
                              version, include)
            continue
        if set(params) - _HARMLESS - {"g", "v"}:
            continue
        for offer in offers:
            type_, subtype = offer.split("/")
            if candidate.type in (type_, "*") and candidate.subtype in (subtype, "*"):
                chosen = Format(offer.encode("ascii"), offer)
                if len(_CHOSEN) < _MAX_CHOSEN and len(accept) <= _MAX_CHOSEN_HEADER:
                    _CHOSEN[accept, offers] = chosen
                return chosen
    raise StatusError.not_acceptable(
        "only the following media types are accepted: " + ", ".join(offers))


def present(info, fmt, obj, now):
    """C{obj} as the format wants it: a Table for objects and lists of C{info}'s kind."""
    if fmt.table is None:
        return obj
    kind = obj.get("kind")
    if kind == info.list_kind:
        return tables.to_table(info, obj["items"], now, fmt.include_object, fmt.table,
                               list_meta=obj.get("metadata"))
    if kind == info.kind:
        return tables.to_table(info, [obj], now, fmt.include_object, fmt.table)
    return obj


#: [COMPAT] the content type of a protobuf watch stream, as clients match it.
PROTOBUF_STREAM = (codecs.PROTOBUF + ";stream=watch").encode("ascii")


def has_protobuf(info):
    """True when C{info}'s kind has a protobuf message (custom kinds answer JSON)."""
    return codecs._protobuf().supports(info.api_version, info.kind)


def watch_format(request, info, clock, spelling=None):
    """
    The format of a watch: its content type and the encoder that writes
    every frame of the stream (see L{orchd.server.watchframes}).

    @param spelling: the apiVersion to answer with, when the client used an
        upstream group name (see L{orchd.api.groups}).
    @return: C{(content type, IWatchEncoder)}.
    """
    fmt = choose(request, allow_yaml=False, info=info)
    if fmt.table is not None:
        return fmt.media, TableFrames(info, fmt, clock, spelling)
    if fmt.codec == codecs.PROTOBUF:
        return PROTOBUF_STREAM, ProtobufFrames(info, spelling)
    return b"application/json", JSONFrames(info, spelling)
