# -*- test-case-name: tests.server.test_watchframes -*-
"""
The frames of a watch stream, in the format the request negotiated.

Every event of a stream is written by the encoder chosen for the request
(L{orchd.server.negotiation.watch_format}): changes, BOOKMARKs (periodic,
at C{timeoutSeconds}, at the end of a streaming list's initial events) and
the ERROR that ends a watch alike, so a protobuf client never meets a JSON
line in its length-prefixed stream. The watch cache hands each encoder
what happened and keeps the frames of a change by the encoder's C{key}, so
each change is encoded once per format however many clients watch.

The formats, as upstream writes them:

 - JSON: one C{{"type": ..., "object": ...}} line per event.
 - Protobuf: a 4-byte big-endian length, then a C{WatchEvent} whose object
   is the enveloped (C{k8s\\x00}) protobuf of the object, the bookmark or
   the C{Status}.
 - Table (C{as=Table}): JSON lines whose object is a one-row Table, for
   bookmarks too (a row of the bookmark object); an ERROR's C{Status} is
   written as it is, as upstream leaves a Status untransformed.
"""

import abc

import orjson
from zope.interface import implementer

from orchd.api import codecs, tables
from orchd.api.errors import StatusError
from orchd.api.groups import in_spelling
from orchd.storage.interfaces import CompactedError, IWatchEncoder

BOOKMARK = "BOOKMARK"
ERROR = "ERROR"
#: [COMPAT] clients look for the upstream spelling of this annotation.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def bookmark_object(kind, api_version, revision, initial_events_end=False):
    """The object of a BOOKMARK: the kind's type and nothing but a resourceVersion."""
    metadata = {"resourceVersion": str(revision)}
    if initial_events_end:
        metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
    return {"kind": kind, "apiVersion": api_version, "metadata": metadata}


def error_status(error):
    """
    The C{Status} an ERROR event carries for C{error}.

    A compacted start is upstream's 410 C{Expired}, which clients answer by
    listing again; anything else is a server-side fault.
    """
    if isinstance(error, StatusError):
        return error.to_status()
    if isinstance(error, CompactedError):
        return StatusError.expired(
            f"too old resource version: {error.requested} ({error.compacted})").to_status()
    return StatusError.internal(f"the watch ended: {error}").to_status()


def _json_line(type, obj):
    return b'{"type":"%s","object":%s}\n' % (type.encode("ascii"), orjson.dumps(obj))


class _Frames(abc.ABC):
    """
    What every format shares: objects answered in the client's spelling,
    bookmarks and errors written as events of the format.

    @param info: the watched resource's L{KindInfo}.
    @param spelling: the apiVersion the client used when it named an
        upstream group (see L{orchd.api.groups}), else None.
    """

    def __init__(self, info, spelling, key):
        self.key = key if spelling is None else (key, spelling)
        self._kind = info.kind
        self._api_version = spelling or info.api_version
        self._spelling = spelling

    def event(self, type, obj):
        if self._spelling is not None:
            obj = in_spelling(obj, self._spelling)
        return self._frame(type, obj)

    def bookmark(self, revision, initial_events_end=False):
        return self._frame(BOOKMARK, bookmark_object(
            self._kind, self._api_version, revision, initial_events_end))

    def error(self, error):
        return self._frame(ERROR, error_status(error))

    @abc.abstractmethod
    def _frame(self, type, obj):
        """The bytes of one event of C{type} carrying C{obj}, in this format."""


@implementer(IWatchEncoder)
class JSONFrames(_Frames):
    """Each event a JSON line."""

    def __init__(self, info, spelling=None):
        super().__init__(info, spelling, "json")

    def _frame(self, type, obj):
        return _json_line(type, obj)


@implementer(IWatchEncoder)
class ProtobufFrames(_Frames):
    """Each event a length-prefixed protobuf C{WatchEvent}."""

    def __init__(self, info, spelling=None):
        super().__init__(info, spelling, "protobuf")
        self._codec = codecs._protobuf()

    def _frame(self, type, obj):
        return self._codec.watch_frame(type, obj)


@implementer(IWatchEncoder)
class TableFrames(_Frames):
    """
    Each event a JSON line whose object is a one-row Table.

    @param fmt: the negotiated L{orchd.server.negotiation.Format} (its Table
        version and C{includeObject}).
    @param clock: an C{IReactorTime}, for the AGE cells.
    """

    def __init__(self, info, fmt, clock, spelling=None):
        super().__init__(info, spelling, ("table", fmt.table, fmt.include_object))
        self._info = info
        self._fmt = fmt
        self._clock = clock

    def error(self, error):
        return _json_line(ERROR, error_status(error))

    def _frame(self, type, obj):
        table = tables.to_table(self._info, [obj], self._clock.seconds(),
                                self._fmt.include_object, self._fmt.table)
        return _json_line(type, table)
