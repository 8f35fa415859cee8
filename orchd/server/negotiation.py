# -*- test-case-name: tests.server.test_negotiation -*-
"""
The response format a request asks for in its Accept header.

JSON, YAML (for answers that are not streams), protobuf for kinds that
have a message, or a server-side printing Table when kubectl asks for one. Watches get an encoder of event frames
from the same choice; the encoder is shared by every watcher that made it
(through its C{key}), so each change is encoded once per format.
"""

import orjson

from orchd.api import codecs, tables
from orchd.api.errors import StatusError
from orchd.api.groups import in_spelling
from orchd.api.query import query_text

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


class JSONFrames:
    """Encodes one watch event as a JSON line."""

    key = "json"

    def __call__(self, type, obj):
        return b'{"type":"%s","object":%s}\n' % (type.encode("ascii"), orjson.dumps(obj))


class ProtobufFrames:
    """Encodes one watch event as a length-prefixed protobuf WatchEvent."""

    key = "protobuf"

    def __call__(self, type, obj):
        return codecs._protobuf().watch_frame(type, obj)


class TableFrames:
    """Encodes one watch event as a JSON line whose object is a one-row Table."""

    def __init__(self, info, fmt, clock):
        self.key = ("table", fmt.table, fmt.include_object)
        self._info = info
        self._fmt = fmt
        self._clock = clock

    def __call__(self, type, obj):
        table = tables.to_table(self._info, [obj], self._clock.seconds(),
                                self._fmt.include_object, self._fmt.table)
        return b'{"type":"%s","object":%s}\n' % (type.encode("ascii"), orjson.dumps(table))


JSON_FRAMES = JSONFrames()
PROTOBUF_FRAMES = ProtobufFrames()
#: [COMPAT] the content type of a protobuf watch stream, as clients match it.
PROTOBUF_STREAM = (codecs.PROTOBUF + ";stream=watch").encode("ascii")


def has_protobuf(info):
    """True when C{info}'s kind has a protobuf message (custom kinds answer JSON)."""
    return codecs._protobuf().supports(info.api_version, info.kind)


class SpelledFrames:
    """Frames whose objects carry the apiVersion spelling the client used."""

    def __init__(self, frames, api_version):
        self.key = (frames.key, api_version)
        self._frames = frames
        self._api_version = api_version

    def __call__(self, type, obj):
        return self._frames(type, in_spelling(obj, self._api_version))


def watch_format(request, info, clock, spelling=None):
    """
    @param spelling: the apiVersion to answer with, when the client used an
        upstream group name (see L{orchd.api.groups}).
    @return: C{(content type, frame encoder)} for a watch.
    """
    fmt = choose(request, allow_yaml=False, info=info)
    if fmt.table is not None:
        return fmt.media, TableFrames(info, fmt, clock)
    if fmt.codec == codecs.PROTOBUF:
        media, frames = PROTOBUF_STREAM, PROTOBUF_FRAMES
    else:
        media, frames = b"application/json", JSON_FRAMES
    return media, SpelledFrames(frames, spelling) if spelling else frames
