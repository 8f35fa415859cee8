# -*- test-case-name: tests.storage.test_contract -*-
"""
etcd v3's JSON gateway over Twisted's HTTP/1.1 Agent: requests, errors, fail-over, watch streams.

The gateway (served by every etcd member on its client URL, C{/v3/...})
maps each gRPC call to a POST of a JSON body. Keys and values travel as
base64, 64-bit integers as strings, and proto3 leaves out every field
that has its default value (an empty value, a PUT event type, a zero
count, C{more: false}), so readers must supply the defaults. A gRPC
failure comes back as an HTTP error with C{{"error", "code", "message"}}.
A watch is one long POST whose response streams one JSON message per line.

Requests go to the current endpoint; one that cannot be connected to is
skipped for the next, for every call. A call whose request may have
reached etcd is retried elsewhere only when it is a read, so a write is
never applied twice.

Calls go straight to C{Agent.request} with a bytes URL, one prebuilt
L{Headers} and a bytes body producer, and JSON goes through orjson: treq's
C{HTTPClient} (hyperlink URL parsing, cookie jar, content decoding) cost
more client CPU per call than the rest of the call together.
"""

import base64

import orjson
from twisted.internet import defer, error as neterror
from twisted.internet.protocol import Protocol
from twisted.web.client import (
    Agent, HTTPConnectionPool, PartialDownloadError, ResponseFailed, readBody,
)
from twisted.web.http_headers import Headers
from twisted.web._newclient import ResponseNeverReceived

from orchd.client.body import BytesProducer
from orchd.storage.interfaces import StoreUnavailableError

#: Connection failures that show the request never reached etcd.
NOT_SENT = (neterror.ConnectError, neterror.ConnectionRefusedError, neterror.DNSLookupError,
            neterror.TimeoutError)
#: Failures after which the request may or may not have been applied.
LOST = (ResponseFailed, ResponseNeverReceived, neterror.ConnectionLost,
        neterror.ConnectionDone, defer.CancelledError)


def b64(data):
    """Base64 text of C{data} (str keys are UTF-8 encoded)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return base64.b64encode(data).decode("ascii")


def unb64(text):
    return base64.b64decode(text) if text else b""


def prefix_end(prefix):
    """The C{range_end} that makes a range cover every key starting with C{prefix} (bytes)."""
    chars = bytearray(prefix)
    while chars:
        if chars[-1] < 0xFF:
            chars[-1] += 1
            return bytes(chars)
        chars.pop()
    return b"\x00"


class EtcdError(Exception):
    """etcd answered a call with a gRPC error."""

    def __init__(self, code, message):
        super().__init__(code, message)
        self.code = code
        self.message = message

    @property
    def compacted(self):
        return "has been compacted" in self.message

    @property
    def future(self):
        return "future revision" in self.message


def _partial(failure):
    """A body cut short without a length still counts, as it did with treq."""
    failure.trap(PartialDownloadError)
    return failure.value.response


def _with_body(response):
    """C{(response, body)} once the whole body is in."""
    d = readBody(response).addErrback(_partial)
    return d.addCallback(lambda content: (response, content))


def revision_of(message):
    """The header revision of a response message (0 when absent)."""
    return int(message.get("header", {}).get("revision", 0))


class Gateway:
    """
    Calls to a set of etcd members through their JSON gateways.

    @param endpoints: client URLs (C{http://} or C{https://}).
    @param tls_policy: an C{IPolicyForHTTPS} for C{https://} endpoints, or None.
    """

    def __init__(self, endpoints, reactor, tls_policy=None, timeout=10):
        if not endpoints:
            raise ValueError("etcd needs at least one endpoint")
        self.endpoints = [url.rstrip("/") for url in endpoints]
        self._urls = [url.encode("ascii") for url in self.endpoints]
        self.current = 0
        self.timeout = timeout
        self.reactor = reactor
        self.pool = HTTPConnectionPool(reactor, persistent=True)
        self.pool.maxPersistentPerHost = 32
        self.pool.retryAutomatically = False
        if tls_policy is not None:
            self.agent = Agent(reactor, contextFactory=tls_policy, pool=self.pool)
        else:
            self.agent = Agent(reactor, pool=self.pool)
        self._headers = Headers({b"Content-Type": [b"application/json"]})
        self.busy = 0
        self._idle = []
        self.streams = set()

    def _next(self, failed):
        """Move off endpoint C{failed} (if still current) to the next one."""
        if self.current == failed:
            self.current = (failed + 1) % len(self.endpoints)

    async def post(self, path, body, *, stream=False, idempotent=True):
        """
        POST C{body} (JSON) to C{path}: the decoded answer, or for C{stream}
        the unread response. Raises L{EtcdError} for a gRPC error and
        L{StoreUnavailableError} when no member can be reached.
        """
        data = orjson.dumps(body)
        self.busy += 1
        try:
            return await self._post(path, data, stream, idempotent)
        finally:
            self.busy -= 1
            if not self.busy and self._idle:
                idle, self._idle = self._idle, []
                for d in idle:
                    d.callback(None)

    async def _exchange(self, url, data):
        """The response and its body; both cancelled (a L{LOST} failure) after C{timeout}."""
        d = self.agent.request(b"POST", url, self._headers, BytesProducer(data))
        d.addCallback(_with_body)
        timer = self.reactor.callLater(self.timeout, d.cancel)
        try:
            return await d
        finally:
            if timer.active():
                timer.cancel()

    async def _post(self, path, data, stream, idempotent=True):
        last = None
        for _ in range(len(self.endpoints)):
            index = self.current
            url = self._urls[index] + path.encode("ascii")
            try:
                if stream:
                    response = await self.agent.request(b"POST", url, self._headers,
                                                        BytesProducer(data))
                    if response.code == 200:
                        return response
                    content = (await _with_body(response))[1]
                else:
                    response, content = await self._exchange(url, data)
            except NOT_SENT as e:
                last = e
                self._next(index)
                continue
            except LOST as e:
                last = e
                self._next(index)
                if idempotent:
                    continue
                raise StoreUnavailableError(
                    f"etcd at {url.decode()}: outcome unknown: {e}") from None
            try:
                answer = orjson.loads(content) if content else {}
            except ValueError:
                raise StoreUnavailableError(
                    f"etcd at {url.decode()} answered {response.code}: {content[:200]!r}") from None
            if response.code == 200 and "error" not in answer:
                return answer
            failure = EtcdError(answer.get("code", 0), answer.get("message") or str(answer))
            if failure.code == 14 and idempotent:  # Unavailable: this member has no leader
                last = failure
                self._next(index)
                continue
            if failure.compacted or failure.future:
                raise failure
            raise StoreUnavailableError(f"etcd at {url.decode()}: {failure.message}")
        raise StoreUnavailableError(f"no etcd member could be reached: {last}")

    def open_stream(self, on_message):
        """A L{LineStream} whose connection L{close} waits to see closed."""
        stream = LineStream(on_message)
        self.streams.add(stream)
        stream.finished.addBoth(lambda _: self.streams.discard(stream))
        return stream

    async def close(self):
        """Wait for calls in flight, close every stream, then the pooled connections."""
        if self.busy:
            d = defer.Deferred()
            self._idle.append(d)
            await d
        for stream in list(self.streams):
            if stream.transport is None:
                self.streams.discard(stream)
                continue
            stream.stop()
        await defer.DeferredList([s.finished for s in list(self.streams)])
        await self.pool.closeCachedConnections()


class LineStream(Protocol):
    """
    Receives a streamed response body and hands each JSON message to C{on_message}.

    C{finished} fires (with the reason) when the stream ends by either side.
    """

    def __init__(self, on_message):
        self.on_message = on_message
        self.finished = defer.Deferred()
        self._buffer = b""
        self.stopped = False

    def dataReceived(self, data):
        self._buffer += data
        while not self.stopped:
            line, sep, rest = self._buffer.partition(b"\n")
            if not sep:
                break
            self._buffer = rest
            if line.strip():
                self.on_message(orjson.loads(line))

    def connectionLost(self, reason):
        if not self.finished.called:
            self.finished.callback(None)

    def stop(self):
        """Abort the stream: the connection is closed, not returned to the pool."""
        self.stopped = True
        if self.transport is not None:
            self.transport.stopProducing()
