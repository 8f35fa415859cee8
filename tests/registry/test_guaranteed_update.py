"""
The registry's one read-modify-write, L{guaranteed_update}, and the writes
of the generic store that go through it, over a store that loses races.
"""

import orjson
from twisted.internet.defer import Deferred, fail
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from orchd.admission.interfaces import IAdmissionPlugin
from orchd.api.errors import StatusError
from orchd.registry.allocator import NODE_PORTS_KEY, AlreadyAllocated, PortRange
from orchd.registry.guaranteed import MAX_ATTEMPTS, Write, guaranteed_update
from orchd.storage.encrypting import StaleKeyValue, TransformingStore
from orchd.storage.interfaces import StoreUnavailableError
from orchd.storage.memory import MemoryStore
from tests.storage.test_encrypting import KEY_ONE, KEY_TWO, config
from tests.support import APIHarness

KEY = "/registry/things/a"
CMS = "/api/v1/namespaces/default/configmaps"
CM_KEY = "/registry/configmaps/default/c"
SERVICES = "/api/v1/namespaces/default/services"
SVC_KEY = "/registry/services/default/s"
ROLES = "/apis/rbac.authorization.orch.io/v1/namespaces/default/roles"
ROLE_KEY = "/registry/rbac.authorization.orch.io/roles/default/r"
UPSTREAM_CONFLICT = ("the object has been modified; please apply your changes to the latest "
                     "version and try again")


class ContendedStore:
    """
    An IStore in front of another that loses races on purpose.

    Before one of the next writes of a key reaches the store, another
    writer's change lands there first (L{interfere}); a write may fail
    (L{fail_writes}). Reads and writes of each key are counted; the other
    writer's changes are not.
    """

    def __init__(self, inner):
        self.inner = inner
        self.reads = []
        self.writes = []
        self._interference = {}
        self._failures = []
        self._read_failures = []
        self.stale_reads = False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def interfere(self, key, times, change=None):
        """
        Let another writer change C{key} before each of its next C{times} writes.

        @param change: C{(store, current KeyValue or None) -> None} doing the
            other write; by default a counter in the stored JSON goes up.
        """
        self._interference[key] = [times, change or _bump]

    def fail_writes(self, error):
        """Fail the next write with C{error}."""
        self._failures.append(error)

    def fail_reads(self, error):
        """Fail the next read with C{error}."""
        self._read_failures.append(error)

    def reads_of(self, key):
        return self.reads.count(key)

    def writes_of(self, key):
        return [op for op, written in self.writes if written == key]

    def _before_write(self, op, key):
        self.writes.append((op, key))
        pending = self._interference.get(key)
        if pending and pending[0]:
            pending[0] -= 1
            pending[1](self.inner, _now(self.inner.get(key)))
        if self._failures:
            raise self._failures.pop(0)

    def get(self, key):
        self.reads.append(key)
        if self._read_failures:
            return fail(self._read_failures.pop(0))
        d = self.inner.get(key)
        if self.stale_reads:
            d.addCallback(lambda kv: kv and StaleKeyValue(kv.key, kv.value, kv.create_revision,
                                                          kv.mod_revision))
        return d

    def create(self, key, value):
        return self._write("create", key, lambda: self.inner.create(key, value))

    def update(self, key, value, expected_revision):
        return self._write("update", key,
                           lambda: self.inner.update(key, value, expected_revision))

    def delete(self, key, expected_revision=None):
        return self._write("delete", key, lambda: self.inner.delete(key, expected_revision))

    def _write(self, op, key, write):
        try:
            self._before_write(op, key)
        except Exception as e:
            return fail(e)
        return write()


def _now(d):
    """The result of a Deferred of a memory store, which has fired."""
    results = []
    d.addBoth(results.append)
    if hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]


def _bump(store, kv):
    """Another writer's change: the stored object's C{n} goes up by one."""
    value = orjson.loads(kv.value)
    value["n"] = value.get("n", 0) + 1
    _now(store.update(kv.key, orjson.dumps(value), kv.mod_revision))


def _label(store, kv):
    """Another writer's change: the stored object gains the label C{other: "yes"}."""
    obj = orjson.loads(kv.value)
    obj["metadata"].setdefault("labels", {})["other"] = "yes"
    _now(store.update(kv.key, orjson.dumps(obj), kv.mod_revision))


def _remove(store, kv):
    _now(store.delete(kv.key, kv.mod_revision))


def _make(value):
    def create(store, kv):
        _now(store.create(KEY, value))
    return create


class Holding:
    """What a write took outside its key, and what became of it."""

    def __init__(self, log):
        self.log = log

    async def revert(self):
        self.log.append("revert")

    async def commit(self):
        self.log.append("commit")


def _contended():
    return StatusError.stale("things", "", "a")


class GuaranteedUpdateTests(SynchronousTestCase):
    """L{guaranteed_update} on its own: reads, writes, retries, the bound and the errors."""

    def setUp(self):
        self.store = ContendedStore(MemoryStore())
        _now(self.store.inner.create(KEY, b'{"n": 0}'))
        self.seen = []
        self.log = []

    def run_update(self, decide, suggestion=None, attempts=MAX_ATTEMPTS):
        """Run a guaranteed update whose try function records each state it is given."""
        async def try_update(kv):
            self.seen.append(None if kv is None else orjson.loads(kv.value))
            return await decide(kv)
        return Deferred.fromCoroutine(guaranteed_update(
            self.store, KEY, try_update, _contended, suggestion, attempts))

    def increment(self, begin=True):
        """A try function adding 10 to C{n}, taking a L{Holding} before its write."""
        async def decide(kv):
            value = orjson.loads(kv.value)
            value["n"] += 10
            return Write.put(value, orjson.dumps,
                             begin=(self.begin if begin else None))
        return decide

    async def begin(self):
        self.log.append("begin")
        return Holding(self.log)

    def stored(self):
        kv = _now(self.store.inner.get(KEY))
        return None if kv is None else orjson.loads(kv.value)

    def test_first_attempt_reads_once_and_writes_once(self):
        """Without contention the update is one read and one compare-and-swap."""
        write = self.successResultOf(self.run_update(self.increment()))
        self.assertEqual((self.store.reads_of(KEY), self.store.writes_of(KEY)), (1, ["update"]))
        self.assertEqual(self.seen, [{"n": 0}])
        self.assertEqual(write.obj, {"n": 10})
        self.assertEqual(write.stored, _now(self.store.inner.get(KEY)))
        self.assertEqual(self.log, ["begin", "commit"])

    def test_conflict_retries_from_the_winner(self):
        """A write that loses its race is decided again from the state that won, without a read."""
        self.store.interfere(KEY, 1)
        self.successResultOf(self.run_update(self.increment()))
        self.assertEqual(self.seen, [{"n": 0}, {"n": 1}])
        self.assertEqual(self.stored(), {"n": 11})
        self.assertEqual(self.store.reads_of(KEY), 1)
        self.assertEqual(self.store.writes_of(KEY), ["update", "update"])

    def test_several_conflicts(self):
        """Each of several lost races gives one more attempt, each from the latest state."""
        self.store.interfere(KEY, 5)
        self.successResultOf(self.run_update(self.increment()))
        self.assertEqual(self.seen, [{"n": i} for i in range(6)])
        self.assertEqual(self.stored(), {"n": 15})
        self.assertEqual(len(self.store.writes_of(KEY)), 6)

    def test_holdings_of_lost_attempts_are_given_back(self):
        """What a losing attempt took is reverted; only the winning one is committed."""
        self.store.interfere(KEY, 2)
        self.successResultOf(self.run_update(self.increment()))
        self.assertEqual(self.log, ["begin", "revert", "begin", "revert", "begin", "commit"])

    def test_bound(self):
        """After MAX_ATTEMPTS lost races the update is refused with upstream's 409."""
        self.store.interfere(KEY, MAX_ATTEMPTS + 5)
        error = self.failureResultOf(self.run_update(self.increment()), StatusError).value
        self.assertEqual((error.code, error.reason), (409, "Conflict"))
        self.assertEqual(error.message,
                         f'Operation cannot be fulfilled on things "a": {UPSTREAM_CONFLICT}')
        self.assertEqual(len(self.seen), MAX_ATTEMPTS)
        self.assertEqual(len(self.store.writes_of(KEY)), MAX_ATTEMPTS)
        self.assertEqual(self.store.reads_of(KEY), 1)
        self.assertEqual(self.stored(), {"n": MAX_ATTEMPTS})
        self.assertEqual(self.log, ["begin", "revert"] * MAX_ATTEMPTS)

    def test_bound_is_a_parameter(self):
        """A smaller bound gives up sooner."""
        self.store.interfere(KEY, 10)
        self.failureResultOf(self.run_update(self.increment(), attempts=3), StatusError)
        self.assertEqual(len(self.seen), 3)

    def test_refusal_on_fresh_state_stands(self):
        """A try function that refuses a state read from the store is not asked again."""
        async def refuse(kv):
            raise StatusError.invalid("Thing", "", "a", [])
        error = self.failureResultOf(self.run_update(refuse), StatusError).value
        self.assertEqual(error.code, 422)
        self.assertEqual((len(self.seen), self.store.writes_of(KEY)), (1, []))

    def test_store_error_on_write(self):
        """A store failure other than a lost race ends the update, its holding given back."""
        self.store.fail_writes(StoreUnavailableError("disk"))
        self.failureResultOf(self.run_update(self.increment()), StoreUnavailableError)
        self.assertEqual(len(self.seen), 1)
        self.assertEqual(self.log, ["begin", "revert"])
        self.assertEqual(self.stored(), {"n": 0})

    def test_store_error_on_read(self):
        """A failed read ends the update before anything is decided."""
        self.store.fail_reads(StoreUnavailableError("disk"))
        self.failureResultOf(self.run_update(self.increment()), StoreUnavailableError)
        self.assertEqual((self.seen, self.store.writes_of(KEY)), ([], []))

    def test_begin_failure(self):
        """A holding that cannot be taken refuses the write; nothing is written."""
        async def begin():
            raise StatusError.invalid("Thing", "", "a", [])

        async def decide(kv):
            return Write.put({"n": 1}, orjson.dumps, begin=begin)
        self.failureResultOf(self.run_update(decide), StatusError)
        self.assertEqual(self.store.writes_of(KEY), [])

    def test_key_deleted_meanwhile(self):
        """A key removed before the write is decided again as absent, without a read."""
        self.store.interfere(KEY, 1, _remove)

        async def decide(kv):
            if kv is None:
                raise StatusError.not_found("things", "", "a")
            return Write.put({"n": 1}, orjson.dumps)
        error = self.failureResultOf(self.run_update(decide), StatusError).value
        self.assertEqual(error.code, 404)
        self.assertEqual(self.seen, [{"n": 0}, None])
        self.assertEqual(self.store.reads_of(KEY), 1)

    def test_create_when_absent(self):
        """A put decided on an absent key creates it."""
        _now(self.store.inner.delete(KEY))

        async def decide(kv):
            return Write.put({"n": 7}, orjson.dumps, detail="created" if kv is None else "")
        write = self.successResultOf(self.run_update(decide))
        self.assertEqual((write.detail, self.stored()), ("created", {"n": 7}))
        self.assertEqual(self.store.writes_of(KEY), ["create"])

    def test_create_race(self):
        """A create that finds the key made by another writer reads it and decides again."""
        _now(self.store.inner.delete(KEY))
        self.store.interfere(KEY, 1, _make(b'{"n": 100}'))

        async def decide(kv):
            if kv is None:
                return Write.put({"n": 7}, orjson.dumps)
            return await self.increment(begin=False)(kv)
        self.successResultOf(self.run_update(decide))
        self.assertEqual(self.seen, [None, {"n": 100}])
        self.assertEqual(self.stored(), {"n": 110})
        self.assertEqual(self.store.writes_of(KEY), ["create", "update"])
        self.assertEqual(self.store.reads_of(KEY), 2)

    def test_delete(self):
        """A delete is a compare-and-swap too; its after step runs once, after it succeeded."""
        self.store.interfere(KEY, 2)

        async def after():
            self.log.append("after")

        async def decide(kv):
            self.log.append("decide")
            return Write.delete(orjson.loads(kv.value), after=after)
        write = self.successResultOf(self.run_update(decide))
        self.assertEqual(write.obj, {"n": 2})
        self.assertIsNone(self.stored())
        self.assertEqual(self.log, ["decide", "decide", "decide", "after"])
        self.assertEqual(self.store.writes_of(KEY), ["delete"] * 3)

    def test_keep_writes_nothing(self):
        """An attempt that keeps the stored state writes nothing and reads once."""
        async def decide(kv):
            return Write.keep("as is")
        write = self.successResultOf(self.run_update(decide))
        self.assertEqual(write.obj, "as is")
        self.assertEqual((self.store.reads_of(KEY), self.store.writes_of(KEY)), (1, []))

    def suggested(self):
        return _now(self.store.inner.get(KEY))

    def test_suggestion_saves_the_read(self):
        """A suggested current state is used as read: no read at all when it is current."""
        self.successResultOf(self.run_update(self.increment(), self.suggested()))
        self.assertEqual((self.store.reads_of(KEY), self.stored()), (0, {"n": 10}))

    def test_outdated_suggestion_conflicts(self):
        """An outdated suggestion loses its compare-and-swap; the update goes on from the winner."""
        old = self.suggested()
        _bump(self.store.inner, old)
        self.successResultOf(self.run_update(self.increment(), old))
        self.assertEqual(self.seen, [{"n": 0}, {"n": 1}])
        self.assertEqual(self.stored(), {"n": 11})

    def test_refusal_of_outdated_suggestion_is_checked(self):
        """A refusal of a suggested state that changed since is decided again on a fresh read."""
        old = self.suggested()
        _bump(self.store.inner, old)

        async def decide(kv):
            if orjson.loads(kv.value)["n"] == 0:
                raise StatusError.invalid("Thing", "", "a", [])
            return Write.put({"n": 50}, orjson.dumps)
        self.successResultOf(self.run_update(decide, old))
        self.assertEqual(self.seen, [{"n": 0}, {"n": 1}])
        self.assertEqual((self.store.reads_of(KEY), self.stored()), (1, {"n": 50}))

    def test_refusal_of_current_suggestion_stands(self):
        """A refusal of a suggested state that is still current is the answer, after one read."""
        async def refuse(kv):
            raise StatusError.invalid("Thing", "", "a", [])
        error = self.failureResultOf(self.run_update(refuse, self.suggested()), StatusError)
        self.assertEqual(error.value.code, 422)
        self.assertEqual((len(self.seen), self.store.reads_of(KEY)), (1, 1))

    def test_keep_of_suggestion_is_confirmed(self):
        """Keeping a suggested state is believed only once a read finds it unchanged."""
        async def decide(kv):
            return Write.keep(orjson.loads(kv.value))
        write = self.successResultOf(self.run_update(decide, self.suggested()))
        self.assertEqual((write.obj, self.store.reads_of(KEY)), ({"n": 0}, 1))

    def test_keep_of_outdated_suggestion_is_decided_again(self):
        """Keeping a suggested state that has changed since is decided again from the fresh one."""
        old = self.suggested()
        _bump(self.store.inner, old)

        async def decide(kv):
            return Write.keep(orjson.loads(kv.value))
        write = self.successResultOf(self.run_update(decide, old))
        self.assertEqual(write.obj, {"n": 1})
        self.assertEqual(self.seen, [{"n": 0}, {"n": 1}])

    def test_keep_of_suggestion_stored_stale_is_decided_again(self):
        """A suggested state found stored under an old encryption key is decided again."""
        stale = []

        async def decide(kv):
            stale.append(kv.stale)
            if kv.stale:
                return Write.put(orjson.loads(kv.value), orjson.dumps)
            return Write.keep(orjson.loads(kv.value))
        self.store.stale_reads = True
        self.successResultOf(self.run_update(decide, self.suggested()))
        self.assertEqual(stale, [False, True])
        self.assertEqual(self.store.writes_of(KEY), ["update"])


@implementer(IAdmissionPlugin)
class WarnsOfRevision:
    """Warns of the revision of the object an update replaces."""

    def admit(self, attributes):
        if attributes.old is not None and attributes.info.resource == "configmaps":
            attributes.warn(f"replacing revision {attributes.old['metadata']['resourceVersion']}")

    def validate(self, attributes):
        pass


class RegistryWritesTests(SynchronousTestCase):
    """Every write of the generic store goes through the guaranteed update."""

    def setUp(self):
        self.store = ContendedStore(MemoryStore())
        self.api = APIHarness(store=self.store, plugins=(WarnsOfRevision(),))
        code, self.cm, _ = self.api.call("POST", CMS, {"metadata": {"name": "c"},
                                                       "data": {"k": "v"}})
        self.assertEqual(code, 201)

    def stored(self, key=CM_KEY):
        kv = _now(self.store.inner.get(key))
        return None if kv is None else orjson.loads(kv.value)

    def test_put_without_version_retries(self):
        """An unconditional PUT that loses its race replaces the winner, never read: the first
        attempt starts from the watch cache's copy, each conflict hands over the winner."""
        self.store.interfere(CM_KEY, 2, _label)
        reads = self.store.reads_of(CM_KEY)
        body = {"metadata": {"name": "c"}, "data": {"k": "new"}}
        code, put, _ = self.api.call("PUT", CMS + "/c", body)
        self.assertEqual(code, 200, put)
        self.assertEqual(self.store.reads_of(CM_KEY) - reads, 0)
        self.assertEqual(self.store.writes_of(CM_KEY), ["create"] + ["update"] * 3)
        self.assertEqual(self.stored()["data"], {"k": "new"})
        self.assertEqual(put["metadata"]["resourceVersion"],
                         str(_now(self.store.inner.get(CM_KEY)).mod_revision))

    def test_cache_behind_the_store(self):
        """A watch cache that has not yet seen the last write costs a conflict, not the write:
        a PUT of the version it read succeeds, a PUT of an older one is 409."""
        (_, provider) = self.api.catalog.lookup("", "v1", "configmaps")
        before = provider.cache.get(CM_KEY)
        _label(self.store.inner, before)
        self.patch(provider.cache, "get", lambda key: before)
        current = self.api.call("GET", CMS + "/c")[1]
        code, put, _ = self.api.call("PUT", CMS + "/c", dict(current, data={"k": "new"}))
        self.assertEqual(code, 200, put)
        self.assertEqual(self.stored()["metadata"]["labels"], {"other": "yes"})
        code, status, _ = self.api.call("PUT", CMS + "/c", dict(current, data={"k": "old"}))
        self.assertEqual((code, status["reason"]), (409, "Conflict"))
        self.assertEqual(self.stored()["data"], {"k": "new"})

    def test_put_with_old_version_is_stale(self):
        """A PUT pinning the version it read is 409 once another write got there first."""
        self.store.interfere(CM_KEY, 1, _label)
        code, status, _ = self.api.call("PUT", CMS + "/c", dict(self.cm, data={"k": "new"}))
        self.assertEqual((code, status["reason"]), (409, "Conflict"))
        self.assertEqual(status["message"],
                         f'Operation cannot be fulfilled on configmaps "c": {UPSTREAM_CONFLICT}')
        self.assertEqual(self.stored()["metadata"]["labels"], {"other": "yes"})

    def test_put_contended_past_the_bound(self):
        """A PUT that loses every race is refused with upstream's 409 after MAX_ATTEMPTS."""
        self.store.interfere(CM_KEY, MAX_ATTEMPTS)
        code, status, _ = self.api.call("PUT", CMS + "/c", {"metadata": {"name": "c"}})
        self.assertEqual((code, status["reason"]), (409, "Conflict"))
        self.assertEqual(status["message"],
                         f'Operation cannot be fulfilled on configmaps "c": {UPSTREAM_CONFLICT}')
        self.assertEqual(len(self.store.writes_of(CM_KEY)), 1 + MAX_ATTEMPTS)

    def test_patch_reapplied_to_the_winner(self):
        """A patch that loses its race is applied again to the new state: both changes stay."""
        self.store.interfere(CM_KEY, 1, _label)
        code, patched, _ = self.api.call("PATCH", CMS + "/c", {"data": {"x": "y"}},
                                         content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200, patched)
        self.assertEqual(patched["metadata"]["labels"], {"other": "yes"})
        self.assertEqual(patched["data"], {"k": "v", "x": "y"})
        self.assertEqual(self.stored()["data"], {"k": "v", "x": "y"})

    def test_warnings_of_lost_attempts_are_dropped(self):
        """Only the attempt that was written speaks in the response's warnings."""
        self.store.interfere(CM_KEY, 1, _label)
        code, patched, headers = self.api.call(
            "PATCH", CMS + "/c", {"data": {"x": "y"}},
            content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200)
        warnings = headers.getRawHeaders(b"warning")
        winner = int(patched["metadata"]["resourceVersion"]) - 1
        self.assertEqual(warnings, [f'299 - "replacing revision {winner}"'.encode()])

    def test_patch_key_deleted_meanwhile(self):
        """A patch whose object is deleted before its write is 404."""
        self.store.interfere(CM_KEY, 1, _remove)
        code, status, _ = self.api.call("PATCH", CMS + "/c", {"data": {"x": "y"}},
                                        content_type=b"application/merge-patch+json")
        self.assertEqual((code, status["reason"]), (404, "NotFound"))

    def test_status_subresource_retries(self):
        """A status write that loses its race is decided again and keeps the winner's spec."""
        code, svc, _ = self.api.call("POST", SERVICES, {
            "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
        self.assertEqual(code, 201, svc)
        self.store.interfere(SVC_KEY, 1, _label)
        svc["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
        del svc["metadata"]["resourceVersion"]
        code, written, _ = self.api.call("PUT", SERVICES + "/s/status", svc)
        self.assertEqual(code, 200, written)
        self.assertEqual(written["metadata"]["labels"], {"other": "yes"})
        self.assertEqual(self.stored(SVC_KEY)["status"], svc["status"])

    def test_apply_retries(self):
        """A server-side apply that loses its race merges into the winner."""
        self.store.interfere(CM_KEY, 1, _label)
        code, applied, _ = self.api.call(
            "PATCH", CMS + "/c?fieldManager=tool",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
             "data": {"a": "b"}}, content_type=b"application/apply-patch+yaml")
        self.assertEqual(code, 200, applied)
        self.assertEqual(applied["metadata"]["labels"], {"other": "yes"})
        self.assertEqual(applied["data"], {"k": "v", "a": "b"})

    def test_apply_create_race(self):
        """An apply that creates, beaten to it by another create, applies to that object."""
        def make(store, kv):
            obj = dict(self.cm, metadata={"name": "d", "namespace": "default", "uid": "u-1",
                                          "labels": {"other": "yes"}})
            obj["metadata"].pop("resourceVersion", None)
            _now(store.create("/registry/configmaps/default/d", orjson.dumps(obj)))
        self.store.interfere("/registry/configmaps/default/d", 1, make)
        code, applied, _ = self.api.call(
            "PATCH", CMS + "/d?fieldManager=tool",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"},
             "data": {"a": "b"}}, content_type=b"application/apply-patch+yaml")
        self.assertEqual(code, 200, applied)
        self.assertEqual((applied["metadata"]["uid"], applied["metadata"]["labels"]),
                         ("u-1", {"other": "yes"}))
        self.assertEqual(self.store.writes_of("/registry/configmaps/default/d"),
                         ["create", "update"])

    def test_create_on_update_race(self):
        """A PUT that creates, beaten to it by another create, updates that object instead."""
        def make(store, kv):
            _now(store.create(ROLE_KEY, orjson.dumps({
                "apiVersion": "rbac.authorization.orch.io/v1", "kind": "Role",
                "metadata": {"name": "r", "namespace": "default", "uid": "u-2",
                             "creationTimestamp": "2023-11-14T22:13:20Z"},
                "rules": []})))
        self.store.interfere(ROLE_KEY, 1, make)
        rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
        code, role, _ = self.api.call("PUT", ROLES + "/r", {"metadata": {"name": "r"},
                                                            "rules": rules})
        self.assertEqual(code, 200, role)
        self.assertEqual((role["metadata"]["uid"], role["rules"]), ("u-2", rules))
        self.assertEqual(self.store.writes_of(ROLE_KEY), ["create", "update"])

    def test_create_on_update_key_deleted_meanwhile(self):
        """A PUT of a kind that creates on update, whose object goes meanwhile, creates it."""
        code, _, _ = self.api.call("POST", ROLES, {"metadata": {"name": "r"}, "rules": []})
        self.assertEqual(code, 201)
        self.store.interfere(ROLE_KEY, 1, _remove)
        rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
        code, role, _ = self.api.call("PUT", ROLES + "/r", {"metadata": {"name": "r"},
                                                            "rules": rules})
        self.assertEqual(code, 201, role)
        self.assertEqual(role["rules"], rules)
        self.assertEqual(self.store.writes_of(ROLE_KEY), ["create", "update", "create"])

    def node_ports(self):
        return _now(Deferred.fromCoroutine(PortRange(self.store.inner).used()))

    def test_allocations_of_lost_attempts_are_given_back(self):
        """Node ports taken by attempts that lost their race are free again; the winner's stay."""
        code, svc, _ = self.api.call("POST", SERVICES, {
            "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})
        self.assertEqual(code, 201, svc)
        self.store.interfere(SVC_KEY, 3, _label)
        svc["spec"]["type"] = "NodePort"
        del svc["metadata"]["resourceVersion"]
        code, updated, _ = self.api.call("PUT", SERVICES + "/s", svc)
        self.assertEqual(code, 200, updated)
        self.assertEqual(self.store.writes_of(SVC_KEY), ["create"] + ["update"] * 4)
        port = updated["spec"]["ports"][0]["nodePort"]
        self.assertEqual(self.node_ports(), [port])
        self.assertEqual(self.stored(SVC_KEY)["spec"]["ports"][0]["nodePort"], port)

    def test_delete_retries_and_releases_once(self):
        """A delete that loses its race is decided again; what the object held is released."""
        code, svc, _ = self.api.call("POST", SERVICES, {
            "metadata": {"name": "s"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}})
        self.assertEqual(code, 201, svc)
        self.assertEqual(len(self.node_ports()), 1)
        self.store.interfere(SVC_KEY, 2, _label)
        code, deleted, _ = self.api.call("DELETE", SERVICES + "/s")
        # A Service's DELETE answers the object as it was last, as upstream's does.
        self.assertEqual((code, deleted["kind"]), (200, "Service"))
        self.assertEqual(deleted["metadata"]["labels"], {"other": "yes"})
        self.assertIsNone(self.stored(SVC_KEY))
        self.assertEqual(self.store.writes_of(SVC_KEY), ["create"] + ["delete"] * 3)
        self.assertEqual(self.node_ports(), [])

    def test_delete_precondition_checked_on_fresh_state(self):
        """A delete's uid precondition is checked again against the state that won."""
        uid = self.cm["metadata"]["uid"]

        def recreate(store, kv):
            obj = orjson.loads(kv.value)
            obj["metadata"]["uid"] = "other"
            _now(store.delete(kv.key))
            _now(store.create(kv.key, orjson.dumps(obj)))
        self.store.interfere(CM_KEY, 1, recreate)
        code, status, _ = self.api.call("DELETE", CMS + "/c",
                                        {"preconditions": {"uid": uid}})
        self.assertEqual((code, status["reason"]), (409, "Conflict"))
        self.assertIn("Precondition failed: UID in precondition", status["message"])
        self.assertIsNotNone(self.stored())

    def test_delete_with_finalizers_marks_the_winner(self):
        """A delete held by finalizers that loses its race marks the new state deleting."""
        code, _, _ = self.api.call("PATCH", CMS + "/c", {"metadata": {"finalizers": ["x/y"]}},
                                   content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200)
        self.store.interfere(CM_KEY, 1, _label)
        code, marked, _ = self.api.call("DELETE", CMS + "/c")
        self.assertEqual(code, 200, marked)
        self.assertTrue(marked["metadata"]["deletionTimestamp"])
        self.assertEqual(marked["metadata"]["labels"], {"other": "yes"})
        stored = self.stored()
        self.assertEqual((stored["metadata"]["labels"], stored["metadata"]["finalizers"]),
                         ({"other": "yes"}, ["x/y"]))

    def test_last_finalizer_removed_racing(self):
        """Removing the last finalizer of a deleting object, racing another write, removes it."""
        code, _, _ = self.api.call("PATCH", CMS + "/c", {"metadata": {"finalizers": ["x/y"]}},
                                   content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200)
        code, _, _ = self.api.call("DELETE", CMS + "/c")
        self.assertEqual(code, 200)
        self.store.interfere(CM_KEY, 1, _label)
        code, _, _ = self.api.call("PATCH", CMS + "/c", {"metadata": {"finalizers": None}},
                                   content_type=b"application/merge-patch+json")
        self.assertEqual(code, 200)
        self.assertIsNone(self.stored())
        self.assertEqual(self.store.writes_of(CM_KEY)[-2:], ["delete", "delete"])

    def test_delete_collection_starts_from_the_listing(self):
        """A collection delete reads none of its objects again, unless one changed meanwhile."""
        for name in ("d", "e"):
            self.api.call("POST", CMS, {"metadata": {"name": name}})
        self.store.interfere("/registry/configmaps/default/d", 1, _label)
        before = list(self.store.reads)
        code, listed, _ = self.api.call("DELETE", CMS)
        self.assertEqual(code, 200, listed)
        self.assertEqual(sorted(i["metadata"]["name"] for i in listed["items"]),
                         ["c", "d", "e"])
        self.assertEqual([i["metadata"].get("labels") for i in listed["items"]
                          if i["metadata"]["name"] == "d"], [{"other": "yes"}])
        read = [key for key in self.store.reads[len(before):] if key.startswith(CM_KEY[:-1])]
        self.assertEqual(read, [])
        self.assertEqual(self.store.writes_of("/registry/configmaps/default/d"),
                         ["create", "delete", "delete"])


class AllocatorRaceTests(SynchronousTestCase):
    """Cluster IP and node port ranges change through the same guaranteed update."""

    def setUp(self):
        self.store = ContendedStore(MemoryStore())
        self.ports = PortRange(self.store, 30000, 100)
        _now(Deferred.fromCoroutine(self.ports.allocate(30001)))

    def taken_by_other(self, port):
        """Another writer's change: it takes C{port} in the same range."""
        def take(store, kv):
            _now(Deferred.fromCoroutine(PortRange(store, 30000, 100).allocate(port)))
        return take

    def test_lost_allocation_chooses_again(self):
        """A port requested while another writer takes it is refused, judged on the winner."""
        self.store.interfere(NODE_PORTS_KEY, 1, self.taken_by_other(30005))
        self.failureResultOf(Deferred.fromCoroutine(self.ports.allocate(30005)),
                             AlreadyAllocated)
        self.assertEqual(self.store.writes_of(NODE_PORTS_KEY), ["create", "update"])

    def test_lost_allocation_of_another_port_goes_on(self):
        """A port taken while another writer takes a different one is written after it."""
        self.store.interfere(NODE_PORTS_KEY, 1, self.taken_by_other(30006))
        self.successResultOf(Deferred.fromCoroutine(self.ports.allocate(30005)))
        self.assertEqual(_now(Deferred.fromCoroutine(self.ports.used())),
                         [30001, 30005, 30006])


class StaleRewriteRaceTests(SynchronousTestCase):
    """The rewrite of a value stored under an old encryption key goes through the same path."""

    def test_lost_rewrite_is_decided_again(self):
        """An unchanged PUT of a stale object that loses its race writes the PUT over the winner."""
        backend = MemoryStore()
        old = APIHarness(store=TransformingStore(backend, config(
            ("one", KEY_ONE), resources=("secrets",)).transformer_for))
        old.call("POST", "/api/v1/namespaces/default/secrets",
                 {"metadata": {"name": "s"}, "data": {"k": "dmFsdWU="}})
        store = ContendedStore(TransformingStore(backend, config(
            ("two", KEY_TWO), ("one", KEY_ONE), resources=("secrets",)).transformer_for))
        api = APIHarness(store=store, system_namespaces=False)
        key = "/registry/secrets/default/s"
        code, secret, _ = api.call("GET", "/api/v1/namespaces/default/secrets/s")
        self.assertEqual(code, 200)
        store.interfere(key, 1, _label)
        del secret["metadata"]["resourceVersion"]
        code, put, _ = api.call("PUT", "/api/v1/namespaces/default/secrets/s", secret)
        self.assertEqual(code, 200, put)
        self.assertEqual(store.writes_of(key), ["update", "update"])
        self.assertNotIn("labels", put["metadata"])
        self.assertTrue(_now(backend.get(key)).value.startswith(b"k8s:enc:aesgcm:v1:two:"))
