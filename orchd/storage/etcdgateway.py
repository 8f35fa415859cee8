# -*- test-case-name: tests.storage.test_contract -*-
"""
etcd v3's JSON gateway: requests, errors, fail-over, watch streams.

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
never applied twice. The HTTP underneath is L{orchd.storage.etcdhttp};
JSON goes through orjson.
"""

import base64
from urllib.parse import urlsplit

import orjson
from twisted.internet import defer

from orchd.storage.etcdhttp import GatewayPool, Lost, NotSent
from orchd.storage.interfaces import StoreUnavailableError


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


def revision_of(message):
    """The header revision of a response message (0 when absent)."""
    return int(message.get("header", {}).get("revision", 0))


def member(url):
    """C{(scheme, host, port)} of an etcd client URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"etcd endpoints are http:// or https:// URLs, not {url!r}")
    return parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


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
        self.pool = GatewayPool(reactor, [member(url) for url in self.endpoints], tls_policy,
                                timeout)
        self.current = 0
        self.busy = 0
        self._idle = []
        self.streams = set()

    def _next(self, failed):
        """Move off endpoint C{failed} (if still current) to the next one."""
        if self.current == failed:
            self.current = (failed + 1) % len(self.endpoints)

    async def post(self, path, body, *, idempotent=True):
        """
        POST C{body} (JSON) to C{path}: the decoded answer. Raises
        L{EtcdError} for a gRPC error and L{StoreUnavailableError} when no
        member can be reached.
        """
        self.busy += 1
        try:
            return await self._send(self.pool.call, path, body, idempotent)
        finally:
            self.busy -= 1
            if not self.busy and self._idle:
                idle, self._idle = self._idle, []
                for d in idle:
                    d.callback(None)

    async def open_stream(self, path, body, stream):
        """
        POST C{body} and hand the endless answer to C{stream} (a
        L{LineStream}); raises as L{post} does when it cannot be opened.
        """
        connection = await self._send(
            lambda index, path, data: self.pool.stream(index, path, data, stream.dataReceived),
            path, body, True)
        stream.attach(connection)
        self.streams.add(stream)
        stream.finished.addBoth(lambda _: self.streams.discard(stream))

    async def _send(self, send, path, body, idempotent):
        data = orjson.dumps(body)
        path = path.encode("ascii")
        last = None
        for _ in range(len(self.endpoints)):
            index = self.current
            where = self.endpoints[index] + path.decode("ascii")
            try:
                status, content = await send(index, path, data)
            except NotSent as e:
                last = e
                self._next(index)
                continue
            except Lost as e:
                last = e
                self._next(index)
                if idempotent:
                    continue
                raise StoreUnavailableError(f"etcd at {where}: outcome unknown: {e}") from None
            if status == 200 and not isinstance(content, bytes):
                return content  # an open stream's connection
            try:
                answer = orjson.loads(content) if content else {}
            except ValueError:
                raise StoreUnavailableError(
                    f"etcd at {where} answered {status}: {content[:200]!r}") from None
            if status == 200 and "error" not in answer:
                return answer
            failure = EtcdError(answer.get("code", 0), answer.get("message") or str(answer))
            if failure.code == 14 and idempotent:  # Unavailable: this member has no leader
                last = failure
                self._next(index)
                continue
            if failure.compacted or failure.future:
                raise failure
            raise StoreUnavailableError(f"etcd at {where}: {failure.message}")
        raise StoreUnavailableError(f"no etcd member could be reached: {last}")

    async def close(self):
        """Wait for calls in flight, then close every stream and connection."""
        if self.busy:
            d = defer.Deferred()
            self._idle.append(d)
            await d
        for stream in list(self.streams):
            stream.stop()
        await self.pool.close()


class LineStream:
    """
    Splits a streamed answer into JSON messages for C{on_message}.

    C{finished} fires when the stream ends by either side.
    """

    def __init__(self, on_message):
        self.on_message = on_message
        self._buffer = b""
        self.stopped = False
        self._connection = None
        self.finished = None

    def attach(self, connection):
        self._connection = connection
        self.finished = connection.finished
        if self.stopped:
            connection.abort()

    def dataReceived(self, data):
        self._buffer += data
        while not self.stopped:
            line, sep, rest = self._buffer.partition(b"\n")
            if not sep:
                break
            self._buffer = rest
            if line.strip():
                self.on_message(orjson.loads(line))

    def stop(self):
        """Abort the stream: its connection is closed."""
        self.stopped = True
        if self._connection is not None:
            self._connection.abort()
