# -*- test-case-name: tests.server.test_negotiation -*-
"""
The response format a request asks for in its Accept header.

JSON, YAML (for answers that are not streams), protobuf for kinds that
have a message, or a server-side printing Table when kubectl asks for one.
Watches get an encoder of event frames from the same choice
(L{orchd.server.watchframes}); watchers whose encoders share a C{key}
share the frames of a change, so each change is encoded once per format.
"""

from orchd.api import codecs, tables
from orchd.api.errors import StatusError
from orchd.api.query import query_text
from orchd.server.watchframes import JSONFrames, ProtobufFrames, TableFrames

_JSON_RANGES = ("application/json", "application/*", "*/*")
_HARMLESS = frozenset(("charset", "pretty", "stream"))


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


def choose(request, allow_yaml=True, info=None):
    """
    The best format of the Accept header that this server serves.

    Ranges with parameters it does not know (other C{as=} conversions) are
    passed over, as upstream passes them, so clients fall back.

    @param info: the resource's L{KindInfo}; protobuf is offered when its
        kind has a message (looked up only if the header names protobuf).
    @raise StatusError: 406 when nothing acceptable is on offer.
    """
    accept = request.getHeader(b"accept")
    if not accept:
        return Format(b"application/json", codecs.JSON)
    offers = (codecs.JSON, codecs.YAML) if allow_yaml else (codecs.JSON,)
    if info is not None and b"protobuf" in accept and has_protobuf(info):
        offers += (codecs.PROTOBUF,)
    for candidate in codecs.parse_accept(accept):
        if candidate.quality <= 0:
            continue
        params = candidate.params
        if "as" in params:
            version = tables.wants_table(params)
            if version is not None and candidate.full in _JSON_RANGES:
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
                return Format(offer.encode("ascii"), offer)
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
