"""etcd_request_duration_seconds at the store seam, for any backend."""

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from orchd.api.metrics import Histogram
from orchd.storage.interfaces import IStore, KeyExistsError
from orchd.storage.memory import MemoryStore
from orchd.storage.timed import TimedStore

PODS = "/registry/pods/default/"
DEPLOYMENTS = "/registry/apps/deployments/default/"


def result(d):
    out = []
    d.addBoth(out.append)
    assert out, "no result yet"
    return out[0]


class TimedStoreTests(SynchronousTestCase):
    def setUp(self):
        self.now = [0.0]
        self.histogram = Histogram("etcd_request_duration_seconds", "E.", ("operation", "type"),
                                   (0.005, 1))
        self.store = TimedStore(
            MemoryStore(), self.histogram,
            lambda: [("/registry/pods/", "pods"), ("/registry/apps/deployments/",
                                                   "deployments.apps")],
            timer=lambda: self.now[0])

    def count(self, operation, type):
        child = self.histogram.child(operation, type)
        return 0 if child is None else child.count

    def test_interface(self):
        """The wrapper is an IStore."""
        verifyObject(IStore, self.store)

    def test_operations_and_types(self):
        """Each call is observed once under its operation and the resource its key names."""
        kv = result(self.store.create(PODS + "a", b"1"))
        result(self.store.update(PODS + "a", b"2", kv.mod_revision))
        result(self.store.get(PODS + "a"))
        result(self.store.list(PODS))
        result(self.store.count(DEPLOYMENTS))
        result(self.store.create(DEPLOYMENTS + "d", b"1"))
        result(self.store.delete(PODS + "a"))
        self.assertEqual(
            [(op, t, self.count(op, t)) for op, t in [
                ("create", "pods"), ("update", "pods"), ("get", "pods"), ("list", "pods"),
                ("listWithCount", "deployments.apps"), ("create", "deployments.apps"),
                ("delete", "pods")]],
            [("create", "pods", 1), ("update", "pods", 1), ("get", "pods", 1),
             ("list", "pods", 1), ("listWithCount", "deployments.apps", 1),
             ("create", "deployments.apps", 1), ("delete", "pods", 1)])

    def test_many_paths(self):
        """Keys under more parent paths than are remembered are still counted under their resource."""
        from orchd.storage import timed
        self.patch(timed, "_CACHED_PARENTS", 3)
        for i in range(7):
            result(self.store.get(f"/registry/pods/ns{i}/a"))
            result(self.store.get(f"/registry/apps/deployments/ns{i}/d"))
        self.assertEqual((self.count("get", "pods"), self.count("get", "deployments.apps")),
                         (7, 7))
        self.assertLessEqual(len(self.store._children["get"]), 3)

    def test_failures_are_observed_and_passed_on(self):
        """A refused call is timed too, and its error reaches the caller."""
        result(self.store.create(PODS + "a", b"1"))
        failure = result(self.store.create(PODS + "a", b"1"))
        self.assertTrue(failure.check(KeyExistsError))
        self.assertEqual(self.count("create", "pods"), 2)

    def test_reads_of_a_known_path(self):
        """Reads of a path seen before, answered at once, are each timed as the first is."""
        now = self.now

        class Advancing(MemoryStore):
            def get(self, key):
                now[0] += 0.5
                return super().get(key)
        store = TimedStore(Advancing(), self.histogram, lambda: [("/registry/pods/", "pods")],
                           timer=lambda: now[0])
        result(store.create(PODS + "a", b"1"))
        found = [result(store.get(PODS + name)) for name in "aab"]
        self.assertEqual([value is not None for value in found], [True, True, False])
        child = self.histogram.child("get", "pods")
        self.assertEqual((child.count, child.sum), (3, 1.5))

    def test_unknown_prefix(self):
        """A key outside the served kinds is labelled by its first segment."""
        result(self.store.get("/registry/leftovers/x"))
        self.assertEqual(self.count("get", "leftovers"), 1)

    def test_kinds_not_yet_known(self):
        """A key seen before the kinds are known does not pin a wrong label for later."""
        kinds = []
        store = TimedStore(MemoryStore(), self.histogram, lambda: kinds,
                           timer=lambda: self.now[0])
        result(store.get(DEPLOYMENTS + "d"))
        self.assertEqual(self.count("get", "apps"), 1)
        kinds.append(("/registry/apps/deployments/", "deployments.apps"))
        result(store.get(DEPLOYMENTS + "d"))
        self.assertEqual(self.count("get", "deployments.apps"), 1)

    def test_answer_that_comes_later(self):
        """A call answered later is timed until its answer, and the answer passed on."""
        from twisted.internet.defer import Deferred

        class Slow(MemoryStore):
            def __init__(self):
                super().__init__()
                self.answers = []

            def get(self, key):
                d = Deferred()
                self.answers.append(d)
                return d
        slow = Slow()
        store = TimedStore(slow, self.histogram, lambda: [("/registry/pods/", "pods")],
                           timer=lambda: self.now[0])
        d = store.get(PODS + "a")
        self.now[0] = 2.0
        slow.answers.pop().callback("the answer")
        self.assertEqual(result(d), "the answer")
        child = self.histogram.child("get", "pods")
        self.assertEqual((child.count, child.sum), (1, 2.0))
