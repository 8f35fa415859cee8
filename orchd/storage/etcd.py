# -*- test-case-name: tests.storage.test_contract -*-
"""
An L{IStore} on etcd v3, over gRPC (L{orchd.storage.etcdgrpc}, which says
why not the JSON gateway).

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

from orchd.storage.etcdgrpc import (
    COMPACT, DELETE_RANGE, RANGE, TXN, EtcdClient, EtcdError, messages,
)
from orchd.storage.etcdwatch import EtcdWatch, WatchMux, prefix_end
from orchd.storage.interfaces import (
    CompactedError, ConflictError, FutureRevisionError, IStore, KeyExistsError,
    KeyNotFoundError, KeyValue, ListResult, StoreUnavailableError,
)

#: How long a write waits for this process's watches to hand its event on.
DELIVERY_TIMEOUT = 10
#: etcd's Compare targets by the revision field they compare.
_TARGETS = {"create_revision": 1, "mod_revision": 2}


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
        self.client = EtcdClient(endpoints, reactor, ca, cert, key)
        self.mux = WatchMux(self)
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

    def _kv(self, kv):
        return KeyValue(self.decode_key(kv.key), kv.value, kv.create_revision, kv.mod_revision)

    def _range(self, prefix, start=None):
        request = messages.RangeRequest()
        encoded = self.encode_key(prefix)
        first = self.encode_key(start) if start is not None and start > prefix else encoded
        request.key = first or b"\x00"
        request.range_end = prefix_end(encoded)
        return request

    # Calls.

    async def _call(self, method, request, idempotent=True):
        if not self._accepting:
            raise StoreUnavailableError("the store is closed")
        return await self.client.call(method, request, idempotent)

    async def _latest(self):
        request = messages.RangeRequest(key=self._root + b"/", keys_only=True)
        return (await self._call(RANGE, request)).header.revision

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
        answer = await self._call(RANGE, messages.RangeRequest(key=self.encode_key(key)))
        return self._kv(answer.kvs[0]) if answer.kvs else None

    def list(self, prefix, revision=0, start=None, limit=0, count_remaining=False):
        return defer.Deferred.fromCoroutine(
            self._list(prefix, revision, start, limit, count_remaining))

    async def _list(self, prefix, revision, start, limit, count_remaining):
        request = self._range(prefix, start)
        if revision:
            if revision < self.compacted_revision:
                raise CompactedError(revision, self.compacted_revision)
            request.revision = revision
        if limit:
            request.limit = limit
        try:
            answer = await self._call(RANGE, request)
        except EtcdError as e:
            raise await self._revision_error(e, revision) from None
        items = [self._kv(kv) for kv in answer.kvs]
        remaining = answer.count - len(items) if count_remaining else None
        return ListResult(items, revision or answer.header.revision, answer.more, remaining)

    def count(self, prefix):
        return defer.Deferred.fromCoroutine(self._count(prefix))

    async def _count(self, prefix):
        request = self._range(prefix)
        request.count_only = True
        return (await self._call(RANGE, request)).count

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

    async def _txn(self, key, target, revision, success):
        """
        C{success} (a filled L{RequestOp}) if C{key}'s C{target} revision
        (C{"create_revision"} or C{"mod_revision"}) equals C{revision}: the
        new revision and the op's answer; else the current value as a conflict.
        """
        request = messages.TxnRequest()
        encoded = self.encode_key(key)
        compare = request.compare.add(key=encoded, target=_TARGETS[target])
        setattr(compare, target, revision)
        request.success.append(success)
        request.failure.add().request_range.key = encoded
        answer = await self._call(TXN, request, idempotent=False)
        if answer.succeeded:
            return answer.header.revision, answer.responses[0]
        kvs = answer.responses[0].response_range.kvs
        if not kvs:
            raise KeyNotFoundError(key)
        raise ConflictError(key, self._kv(kvs[0]))

    def create(self, key, value):
        return self._write(self._create(key, value))

    async def _create(self, key, value):
        self._check_types(key, value)
        put = messages.RequestOp()
        put.request_put.key = self.encode_key(key)
        put.request_put.value = value
        try:
            revision, _ = await self._txn(key, "create_revision", 0, put)
        except ConflictError:
            raise KeyExistsError(key) from None
        await self._delivered(key, revision)
        return KeyValue(key, value, revision, revision)

    def update(self, key, value, expected_revision):
        return self._write(self._update(key, value, expected_revision))

    async def _update(self, key, value, expected_revision):
        self._check_types(key, value)
        put = messages.RequestOp()
        put.request_put.key = self.encode_key(key)
        put.request_put.value = value
        put.request_put.prev_kv = True
        revision, response = await self._txn(key, "mod_revision", expected_revision, put)
        await self._delivered(key, revision)
        return KeyValue(key, value, response.response_put.prev_kv.create_revision, revision)

    def delete(self, key, expected_revision=None):
        return self._write(self._delete(key, expected_revision))

    async def _delete(self, key, expected_revision):
        self._check_types(key, None)
        request = messages.DeleteRangeRequest(key=self.encode_key(key), prev_kv=True)
        if expected_revision is None:
            answer = await self._call(DELETE_RANGE, request, idempotent=False)
            revision, previous = answer.header.revision, answer.prev_kvs
        else:
            op = messages.RequestOp()
            op.request_delete_range.CopyFrom(request)
            revision, response = await self._txn(key, "mod_revision", expected_revision, op)
            previous = response.response_delete_range.prev_kvs
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
            await self._call(COMPACT, messages.CompactionRequest(revision=revision))
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
            return defer.Deferred.fromCoroutine(self._close())
        return defer.succeed(None)

    async def _close(self):
        await self.mux.close()
        await self.client.close()
