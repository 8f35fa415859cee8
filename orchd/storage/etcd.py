# -*- test-case-name: tests.storage.test_contract -*-
"""
An L{IStore} on etcd v3, through its JSON gateway with Twisted's Agent.

Why the gateway and not gRPC: every etcd v3 member serves it, it needs
nothing beyond Twisted's HTTP client (already used by orchd's client), it
stays on the reactor without a thread per stream (grpcio's Python API
blocks or needs asyncio), and each store call is one small request. Its
cost on the client is what limits creates: through treq it was about
1 ms of CPU per call; calling C{Agent.request} directly with orjson
(L{orchd.storage.etcdgateway}) brought it to about 0.4 ms, which took
16 concurrent creates from ~870/s to ~1,200/s (two calls each). What is
left is mostly Twisted's HTTP/1.1 and reactor machinery; a minimal
persistent HTTP client protocol would be the next step.

etcd's semantics are the store's: its revision is the global revision and
a key's C{mod_revision} the object's C{resourceVersion}. A create is a
transaction on C{create_revision == 0}, an update or a conditional delete
a transaction on C{mod_revision}, whose failure branch reads the key so a
conflict carries the current value. Lists read at one revision (a later
page passes the first page's revision) and etcd itself refuses compacted
and future revisions. Keys keep their C{/registry/...} form under the
C{--etcd-prefix}: the default C{/registry} stores them as they are; a
prefix C{P/registry} (or any other C{P}) puts them under C{P}.

A write returns only once every live watch of this store that covers the
key has handed its event on, so a process sees its own writes in its
watches in order, as with the LevelDB backend. Other API servers on the
same etcd see them through their own watches, moments later.
"""

from twisted.internet import defer
from twisted.logger import Logger
from zope.interface import implementer

from orchd.storage.etcdgateway import EtcdError, Gateway, b64, prefix_end, revision_of, unb64
from orchd.storage.etcdwatch import EtcdWatch
from orchd.storage.interfaces import (
    CompactedError, ConflictError, FutureRevisionError, IStore, KeyExistsError,
    KeyNotFoundError, KeyValue, ListResult, StoreUnavailableError,
)

#: How long a write waits for this process's watches to hand its event on.
DELIVERY_TIMEOUT = 10


def tls_policy(ca=None, cert=None, key=None):
    """A client TLS policy from PEM file paths, or None when none is given."""
    if not (ca or cert or key):
        return None
    from orchd.client.tls import ClientTLSPolicy

    def read(path):
        if path is None:
            return None
        with open(path, "rb") as f:
            return f.read()

    return ClientTLSPolicy(read(ca), read(cert), read(key))


def root_of(prefix):
    """What every key is stored under: C{/registry} keys map onto C{prefix} itself."""
    root = prefix.rstrip("/")
    if root.endswith("/registry"):
        root = root[: -len("/registry")]
    return root.encode("utf-8")


@implementer(IStore)
class EtcdStore:
    """
    @param endpoints: etcd client URLs; a member that cannot be reached is skipped.
    @param prefix: the C{--etcd-prefix}.
    @param ca: path of the CA bundle etcd's serving certificate must chain to.
    @param cert: path of the client certificate to present to etcd; C{key} its key.
    """

    log = Logger()

    def __init__(self, endpoints, reactor, prefix="/registry", ca=None, cert=None, key=None):
        self.reactor = reactor
        self.gateway = Gateway(endpoints, reactor, tls_policy(ca, cert, key))
        self._root = root_of(prefix)
        self.compacted_revision = 0
        self._watches = set()
        self._writes = set()
        self._accepting = True

    # Keys and values.

    def encode_key(self, key):
        return self._root + key.encode("utf-8")

    def decode_key(self, data):
        return data[len(self._root):].decode("utf-8")

    def _kv(self, message):
        return KeyValue(self.decode_key(unb64(message.get("key"))), unb64(message.get("value")),
                        int(message.get("create_revision", 0)), int(message.get("mod_revision", 0)))

    def _range(self, prefix, start=None):
        encoded = self.encode_key(prefix)
        first = self.encode_key(start) if start is not None and start > prefix else encoded
        return {"key": b64(first or b"\x00"), "range_end": b64(prefix_end(encoded))}

    # Calls.

    async def _call(self, path, body, idempotent=True):
        if not self._accepting:
            raise StoreUnavailableError("the store is closed")
        return await self.gateway.post(path, body, idempotent=idempotent)

    async def _latest(self):
        answer = await self._call("/v3/kv/range", {"key": b64(self._root + b"/"), "keys_only": True})
        return revision_of(answer)

    async def _revision_error(self, error, revision):
        if error.compacted:
            self.saw_compaction(revision + 1)
            return CompactedError(revision, self.compacted_revision)
        return FutureRevisionError(revision, await self._latest())

    def saw_compaction(self, revision):
        """Learn that etcd's history starts at C{revision} (compacted by anyone)."""
        self.compacted_revision = max(self.compacted_revision, revision)

    # Reads.

    def get(self, key):
        return defer.Deferred.fromCoroutine(self._get(key))

    async def _get(self, key):
        answer = await self._call("/v3/kv/range", {"key": b64(self.encode_key(key))})
        kvs = answer.get("kvs")
        return self._kv(kvs[0]) if kvs else None

    def list(self, prefix, revision=0, start=None, limit=0, count_remaining=False):
        return defer.Deferred.fromCoroutine(
            self._list(prefix, revision, start, limit, count_remaining))

    async def _list(self, prefix, revision, start, limit, count_remaining):
        body = self._range(prefix, start)
        if revision:
            if revision < self.compacted_revision:
                raise CompactedError(revision, self.compacted_revision)
            body["revision"] = revision
        if limit:
            body["limit"] = limit
        try:
            answer = await self._call("/v3/kv/range", body)
        except EtcdError as e:
            raise await self._revision_error(e, revision) from None
        items = [self._kv(kv) for kv in answer.get("kvs", ())]
        more = bool(answer.get("more", False))
        remaining = int(answer.get("count", 0)) - len(items) if count_remaining else None
        return ListResult(items, revision or revision_of(answer), more, remaining)

    def count(self, prefix):
        return defer.Deferred.fromCoroutine(self._count(prefix))

    async def _count(self, prefix):
        body = dict(self._range(prefix), count_only=True)
        return int((await self._call("/v3/kv/range", body)).get("count", 0))

    # Writes.

    def _check_types(self, key, value):
        if not isinstance(key, str) or (value is not None and not isinstance(value, bytes)):
            raise TypeError(f"keys are str and values bytes, not {key!r}, {type(value)}")

    def _write(self, coroutine):
        d = defer.Deferred.fromCoroutine(coroutine)
        self._writes.add(d)
        d.addBoth(lambda result: (self._writes.discard(d), result)[1])
        return d

    async def _delivered(self, key, revision):
        """Wait until this store's live watches covering C{key} have handed C{revision} on."""
        waits = [w.reached(revision) for w in list(self._watches) if w.covers(key, revision)]
        if waits:
            d = defer.gatherResults(waits, consumeErrors=True)
            d.addTimeout(DELIVERY_TIMEOUT, self.reactor)
            try:
                await d
            except defer.TimeoutError:
                self.log.warn("Watches did not see revision {revision} in time", revision=revision)

    async def _txn(self, key, compare, success):
        encoded = b64(self.encode_key(key))
        body = {"compare": [dict(compare, key=encoded)], "success": [success],
                "failure": [{"request_range": {"key": encoded}}]}
        answer = await self._call("/v3/kv/txn", body, idempotent=False)
        response = answer.get("responses", [{}])[0]
        if answer.get("succeeded"):
            return revision_of(answer), response
        kvs = response.get("response_range", {}).get("kvs")
        if not kvs:
            raise KeyNotFoundError(key)
        raise ConflictError(key, self._kv(kvs[0]))

    def create(self, key, value):
        return self._write(self._create(key, value))

    async def _create(self, key, value):
        self._check_types(key, value)
        put = {"request_put": {"key": b64(self.encode_key(key)), "value": b64(value)}}
        try:
            revision, _ = await self._txn(
                key, {"target": "CREATE", "create_revision": 0, "result": "EQUAL"}, put)
        except ConflictError:
            raise KeyExistsError(key) from None
        await self._delivered(key, revision)
        return KeyValue(key, value, revision, revision)

    def update(self, key, value, expected_revision):
        return self._write(self._update(key, value, expected_revision))

    async def _update(self, key, value, expected_revision):
        self._check_types(key, value)
        put = {"request_put": {"key": b64(self.encode_key(key)), "value": b64(value),
                               "prev_kv": True}}
        revision, response = await self._txn(
            key, {"target": "MOD", "mod_revision": expected_revision, "result": "EQUAL"}, put)
        prev = response.get("response_put", {}).get("prev_kv", {})
        await self._delivered(key, revision)
        return KeyValue(key, value, int(prev.get("create_revision", 0)), revision)

    def delete(self, key, expected_revision=None):
        return self._write(self._delete(key, expected_revision))

    async def _delete(self, key, expected_revision):
        self._check_types(key, None)
        request = {"key": b64(self.encode_key(key)), "prev_kv": True}
        if expected_revision is None:
            answer = await self._call("/v3/kv/deleterange", request, idempotent=False)
            revision, previous = revision_of(answer), answer.get("prev_kvs")
        else:
            revision, response = await self._txn(
                key, {"target": "MOD", "mod_revision": expected_revision, "result": "EQUAL"},
                {"request_delete_range": request})
            previous = response.get("response_delete_range", {}).get("prev_kvs")
        if not previous:
            raise KeyNotFoundError(key)
        await self._delivered(key, revision)
        return revision, self._kv(previous[0])

    # Watches.

    def watch(self, prefix, after_revision, on_events, on_error):
        if not self._accepting:
            return defer.fail(StoreUnavailableError("the store is closed"))
        if after_revision and after_revision < self.compacted_revision:
            return defer.fail(CompactedError(after_revision, self.compacted_revision))
        watch = EtcdWatch(self, prefix, after_revision, on_events, on_error)
        self._watches.add(watch)
        return watch.start()

    def forget(self, watch):
        self._watches.discard(watch)

    # Revisions and life cycle.

    def current_revision(self):
        return defer.Deferred.fromCoroutine(self._current_revision())

    async def _current_revision(self):
        # Writes still on their way to this store's watches come first.
        if self._writes:
            await defer.DeferredList(list(self._writes), consumeErrors=True)
        return await self._latest()

    def compact(self, revision):
        return defer.Deferred.fromCoroutine(self._compact(revision))

    async def _compact(self, revision):
        try:
            await self._call("/v3/kv/compaction", {"revision": revision})
        except EtcdError as e:
            if e.future:
                raise FutureRevisionError(revision, await self._latest()) from None
            if not e.compacted:
                raise
        self.saw_compaction(revision)

    def check(self):
        return defer.Deferred.fromCoroutine(self._check())

    async def _check(self):
        await self._latest()

    def close(self):
        if self._accepting:
            self._accepting = False
            for watch in list(self._watches):
                watch.end(StoreUnavailableError("the store is closed"))
            return defer.Deferred.fromCoroutine(self.gateway.close())
        return defer.succeed(None)
