# -*- test-case-name: tests.storage.test_contract -*-
"""
etcd v3's gRPC API for the store: members, fail-over, calls and the watch stream.

Why gRPC and not etcd's JSON gateway: the gateway is a proxy inside etcd
that decodes JSON, calls etcd's own gRPC service over loopback and encodes
the answer back, which made etcd spend about three times the CPU on a
transaction (0.62 ms against 0.21 ms in one measurement) and as much again
on every watch event. The calls travel over L{orchd.storage.grpcwire} on
the reactor; messages are our own definitions (C{etcddefs/etcd.proto})
encoded by the protobuf package.

Calls go to the current member over one HTTP/2 connection to it; a member
that cannot be reached is left for the next one, for every later call. A
call that may have reached etcd is retried elsewhere only when it is a read,
so a write is never applied twice.

Every watch of a store shares one bidirectional Watch stream, as etcd's own
client does (L{orchd.storage.etcdwatch.WatchMux}).
"""

import os
from urllib.parse import urlsplit

from twisted.internet import defer
from twisted.internet.endpoints import HostnameEndpoint, connectProtocol, wrapClientTLS

from orchd.api.proto.schema import Schema
from orchd.storage.grpcwire import UNAVAILABLE, GrpcConnection, GrpcError, Lost, NotSent
from orchd.storage.interfaces import StoreUnavailableError

DEFS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "etcddefs")


class Messages:
    """The message classes of C{etcddefs/etcd.proto} by name (C{messages.TxnRequest})."""

    def __init__(self):
        self._schema = Schema(DEFS)

    def __getattr__(self, name):
        cls = self._schema.message_class(f"orch.etcd.{name}")
        if cls is None:
            raise AttributeError(name)
        setattr(self, name, cls)
        return cls


messages = Messages()

#: The unary methods: path, answer class.
RANGE = (b"/etcdserverpb.KV/Range", messages.RangeResponse)
TXN = (b"/etcdserverpb.KV/Txn", messages.TxnResponse)
DELETE_RANGE = (b"/etcdserverpb.KV/DeleteRange", messages.DeleteRangeResponse)
COMPACT = (b"/etcdserverpb.KV/Compact", messages.CompactionResponse)
WATCH = b"/etcdserverpb.Watch/Watch"


class EtcdError(Exception):
    """etcd refused a call (a gRPC status other than a lost connection)."""

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


def member(url):
    """C{(host, port, tls)} of an etcd client URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"etcd endpoints are http:// or https:// URLs, not {url!r}")
    return parts.hostname, parts.port or 2379, parts.scheme == "https"


def _read(path):
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


class EtcdClient:
    """
    Calls to a set of etcd members.

    @param endpoints: client URLs (C{http://} or C{https://}).
    @param ca: path of the CA bundle etcd's serving certificate must chain
        to (None: the platform's); C{cert} and C{key}: the client
        certificate to present, for C{https} members.
    """

    def __init__(self, endpoints, reactor, ca=None, cert=None, key=None, timeout=10):
        if not endpoints:
            raise ValueError("etcd needs at least one endpoint")
        self.endpoints = [url.rstrip("/") for url in endpoints]
        members = [member(url) for url in self.endpoints]
        policy = None
        if any(tls for _, _, tls in members):
            from orchd.tls.client import ClientTLSPolicy

            policy = ClientTLSPolicy(_read(ca), _read(cert), _read(key), protocols=[b"h2"])
        self.reactor = reactor
        self.timeout = timeout
        self._members = [(self._endpoint(host, port, tls, policy), host, port, tls)
                         for host, port, tls in members]
        self.current = 0
        self._connections = {}
        self._connecting = {}
        self.closed = False
        self.busy = 0
        self._idle = []

    def _endpoint(self, host, port, tls, policy):
        endpoint = HostnameEndpoint(self.reactor, host, port, timeout=self.timeout)
        if tls:
            endpoint = wrapClientTLS(policy.creatorForNetloc(host.encode("idna"), port), endpoint)
        return endpoint

    def _next(self, failed):
        """Move off member C{failed} (if still current) to the next one."""
        if self.current == failed:
            self.current = (failed + 1) % len(self.endpoints)

    # Connections.

    def connection(self, index):
        """A Deferred of a usable connection to member C{index} (one, shared)."""
        connection = self._connections.get(index)
        if connection is not None and connection.usable:
            return defer.succeed(connection)
        d = defer.Deferred()
        waiting = self._connecting.get(index)
        if waiting is None:
            waiting = self._connecting[index] = []
            endpoint, host, port, tls = self._members[index]
            authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            protocol = GrpcConnection(authority.encode("idna"), b"https" if tls else b"http",
                                      self.reactor, self.timeout)
            connectProtocol(endpoint, protocol).addCallbacks(
                self._connected, self._not_connected, (index,), None, (index,))
        waiting.append(d)
        return d

    def _connected(self, connection, index):
        self._connections[index] = connection
        for d in self._connecting.pop(index, ()):
            d.callback(connection)

    def _not_connected(self, failure, index):
        for d in self._connecting.pop(index, ()):
            d.errback(NotSent(failure.getErrorMessage()))

    # Unary calls.

    async def call(self, method, request, idempotent=True):
        """
        The answer of C{method} (L{RANGE}, L{TXN}, ...) to C{request}.
        Raises L{EtcdError} for a compacted or future revision, and
        L{StoreUnavailableError} when no member could answer.
        """
        if self.closed:
            raise StoreUnavailableError("the store is closed")
        self.busy += 1
        try:
            return await self._call(method, request.SerializeToString(), idempotent)
        finally:
            self.busy -= 1
            if not self.busy and self._idle:
                idle, self._idle = self._idle, []
                for d in idle:
                    d.callback(None)

    async def _call(self, method, data, idempotent):
        path, answer_class = method
        last = None
        for _ in range(len(self.endpoints)):
            index = self.current
            where = self.endpoints[index]
            try:
                connection = await self.connection(index)
                return answer_class.FromString(await connection.unary(path, data))
            except NotSent as e:
                last = f"{where}: {e}"
                self._next(index)
                continue
            except Lost as e:
                last = f"{where}: {e}"
                self._next(index)
                if idempotent:
                    continue
                raise StoreUnavailableError(f"etcd at {where}: outcome unknown: {e}") from None
            except GrpcError as e:
                if e.code == UNAVAILABLE and idempotent:  # e.g. this member has no leader
                    last = f"{where}: {e.message}"
                    self._next(index)
                    continue
                failure = EtcdError(e.code, e.message)
                if failure.compacted or failure.future:
                    raise failure from None
                raise StoreUnavailableError(f"etcd at {where}: {e.message}") from None
        raise StoreUnavailableError(f"no etcd member could be reached: {last}")

    # Watches.

    def watch_stream(self, on_response, on_end):
        """A L{WatchStream} on the current member."""
        return WatchStream(self, self.current, on_response, on_end)

    async def close(self):
        """Refuse new calls, wait for those in flight, then close every connection."""
        self.closed = True
        if self.busy:
            d = defer.Deferred()
            self._idle.append(d)
            await d
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            connection.close()
        await defer.DeferredList([c.finished for c in connections])


class WatchStream:
    """
    One Watch call to one member. L{send} sends a request (queued until the
    call is open); C{on_response(stream, answer)} gets each answer, then
    C{on_end(stream, error or None)} its end.

    @ivar ended: fires once C{on_end} has run.
    """

    def __init__(self, client, index, on_response, on_end):
        self.index = index
        self.where = client.endpoints[index]
        self.ended = defer.Deferred()
        self._on_response = on_response
        self._on_end = on_end
        self._queued = []
        self._connection = self._call = None
        self._closed = False
        client.connection(index).addCallbacks(self._opened, self._finish)

    def _opened(self, connection):
        if self._closed:
            return self._finish(None)
        call = connection.stream(WATCH, self._answer)
        if call is None:
            return self._finish(NotSent("the connection is closing"))
        self._connection, self._call = connection, call
        for request in self._queued:
            connection.send(call, request)
        self._queued = []
        call.done.addBoth(self._finish)

    def _answer(self, data):
        self._on_response(self, messages.WatchResponse.FromString(data))

    def send(self, request):
        data = request.SerializeToString()
        if self._call is None:
            self._queued.append(data)
        else:
            self._connection.send(self._call, data)

    def _finish(self, result):
        if self.ended.called:
            return
        error = getattr(result, "value", None)
        try:
            self._on_end(self, error)
        finally:
            self.ended.callback(None)

    def close(self):
        """End the stream; C{ended} fires once it has."""
        self._closed = True
        if self._call is not None:
            self._connection.cancel(self._call)
