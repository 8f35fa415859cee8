# -*- test-case-name: tests.server.test_watch -*-
"""
GET of a collection with C{watch=true}: a stream of change events.

Events are written as they happen with chunked transfer, every one of them
(bookmarks and the ending ERROR too) by the encoder of the negotiated format:
JSON lines, one-row Tables for C{kubectl get -w}, or length-prefixed protobuf
(L{orchd.server.watchframes}). The stream is a push producer on the
connection: when the client stops reading, the watcher's queue grows instead
of the connection's, and a client that stays stuck is dropped.
"""

import random

from twisted.internet.interfaces import IPushProducer
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOProtocol
from zope.interface import implementer

from orchd.api.errors import FieldError, StatusError
from orchd.server.handlers.list import list_options
from orchd.server.negotiation import watch_format

log = Logger()
_NOT_OLDER_THAN = "NotOlderThan"
#: The longest a watch lasts, whatever its timeoutSeconds asks (one day).
MAX_WATCH_TIMEOUT = 24 * 3600


class WatchOptions:
    """What a watch asks for, beyond the list options it shares."""

    __slots__ = ("list", "allow_bookmarks", "send_initial_events", "timeout")

    def __init__(self, list_options, allow_bookmarks, send_initial_events, timeout):
        self.list = list_options
        self.allow_bookmarks = allow_bookmarks
        self.send_initial_events = send_initial_events
        self.timeout = timeout


def watch_options(scope, min_request_timeout):
    """Read and validate the watch parameters (422 on ListOptions as upstream)."""
    options = list_options(scope, watching=True)
    send_initial = scope.query_bool("sendInitialEvents", None)
    allow_bookmarks = scope.query_bool("allowWatchBookmarks")
    errors = []
    match = options.resource_version_match
    if send_initial is not None:
        if match != _NOT_OLDER_THAN:
            errors.append(FieldError.forbidden(
                "resourceVersionMatch",
                f"sendInitialEvents requires setting resourceVersionMatch to {_NOT_OLDER_THAN}"))
        elif send_initial and not allow_bookmarks:
            errors.append(FieldError.forbidden(
                "allowWatchBookmarks", "sendInitialEvents requires allowWatchBookmarks=true"))
    elif match:
        errors.append(FieldError.forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
    if match and match != _NOT_OLDER_THAN:
        errors.append(FieldError.not_supported("resourceVersionMatch", match, [_NOT_OLDER_THAN]))
    if errors:
        raise StatusError.invalid("ListOptions", "meta.k8s.io", "", errors)
    timeout = scope.query_int("timeoutSeconds", 0)
    if timeout <= 0:
        # As upstream: spread reconnects of long-lived clients over time.
        timeout = min_request_timeout * (1 + random.random())
    # No timer for years ahead: past the cap the watch ends early, cleanly,
    # and the client starts the next one, as it would at any timeout.
    timeout = min(timeout, MAX_WATCH_TIMEOUT)
    return WatchOptions(options, allow_bookmarks, send_initial, timeout)


def chunk_writer(channel):
    """
    C{write(bytes)} for the chunks of a watch on C{channel}'s connection.

    A TLS connection of twisted's (L{BufferingTLSTransport}) holds each
    write for a call at the next reactor turn, so that small writes go out
    together; the watch cache already gathers a watcher's frames into one
    write per flush, and that call, among the timers of thousands of open
    watches, costs about as much again as the encryption of a frame. Its
    chunks are encrypted at once instead, after anything the connection
    still holds. Any other transport is written to as usual.
    """
    transport = channel.transport
    aggregator = getattr(transport, "_aggregator", None)
    if not isinstance(transport, TLSMemoryBIOProtocol) or aggregator is None:
        return channel.write

    def write(data):
        aggregator.flush()
        TLSMemoryBIOProtocol.write(transport, data)

    return write


@implementer(IPushProducer)
class WatchResponse:
    """
    The HTTP side of one watch: headers, frames, the end, and flow control.

    The connection pauses and resumes it as its buffer fills and drains.
    """

    def __init__(self, request, clock, content_type, events=None):
        self.request = request
        self.clock = clock
        #: The C{apiserver_watch_events_total} child the frames count in, if any.
        self.events = events
        self.watcher = None
        self.closed = False
        self._timer = None
        request.setResponseCode(200)
        request.setHeader(b"content-type", content_type)
        request.setHeader(b"cache-control", b"no-cache, private")
        request.registerProducer(self, True)
        request.write(b"")   # headers now: clients wait for them before reading events
        #: Where the chunks of the body go when it is sent in chunks (HTTP/1.1,
        #: which L{write} frames), else None.
        self._write_chunk = chunk_writer(request.channel) if request.chunked else None
        request.notifyFinish().addBoth(self._gone)

    def attach(self, watcher, timeout):
        self.watcher = watcher
        if not self.closed:
            self._timer = self.clock.callLater(timeout, self.finish_cleanly)

    # sink, as the cache's watchers use it

    def write(self, data, frames=1):
        """
        C{data} holds C{frames} whole frames.

        The chunk is framed here and written at once (L{chunk_writer}):
        twisted.web would hand a copy of C{data} per watcher to the
        connection, to be encrypted at the next turn, where watchers at one
        place in a stream are given one C{data} (L{orchd.storage.watchcache});
        thousands of copies were held at once.
        """
        if self.closed or not data:
            return
        request = self.request
        if self._write_chunk is not None and not request.finished:
            request.sentLength += len(data)
            self._write_chunk(b"%x\r\n%b\r\n" % (len(data), data))
        else:
            request.write(data)
        if self.events is not None:
            self.events.value += frames

    def finish(self):
        if self.closed:
            return
        self.closed = True
        self._cancel_timer()
        self.request.unregisterProducer()
        self.request.finish()

    def drop(self, reason):
        if self.closed:
            return
        log.info("Dropping watch {path}: {reason}", path=self.request.path, reason=reason)
        self.closed = True
        self._cancel_timer()
        self.request.unregisterProducer()
        self.request.transport.abortConnection()

    def finish_cleanly(self):
        """timeoutSeconds reached: a last bookmark, then the end of the stream."""
        self._timer = None
        watcher = self.watcher
        if watcher is not None and not watcher.stopped:
            if watcher.bookmarks:
                watcher.send_bookmark()
            watcher.flush()
            watcher.stop()
        self.finish()

    # IPushProducer

    def pauseProducing(self):
        if self.watcher is not None:
            self.watcher.pause()

    def resumeProducing(self):
        if self.watcher is not None:
            self.watcher.resume()

    def stopProducing(self):
        self._gone(None)

    def _gone(self, _):
        self.closed = True
        self._cancel_timer()
        if self.watcher is not None:
            self.watcher.stop()

    def _cancel_timer(self):
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None


async def handle(scope):
    """Start a watch; the response stays open until the watch ends."""
    options = watch_options(scope, scope.settings.min_request_timeout)
    content_type, encoder = watch_format(scope.request, scope.kind, scope.provider.clock,
                                         scope.spelling)
    start = await scope.provider.prepare_watch(scope.ctx, options)
    metrics = scope.settings.metrics
    response = WatchResponse(scope.request, scope.provider.clock, content_type,
                             metrics.watch_counter(scope.kind) if metrics is not None else None)
    watcher = start(response, encoder)
    response.attach(watcher, options.timeout)
