"""Taint eviction: pods leave nodes tainted NoExecute, at once or after their tolerations."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.defaulttolerationseconds import DefaultTolerationSeconds
from orchd.api import taints as t
from orchd.controllers.nodelifecycle import NodeLifecycleController
from orchd.controllers.tainteviction import TaintEvictionController, eviction_delay
from orchd.api.meta import rfc3339
from tests.support import APIHarness

NODES = "/api/v1/nodes"
PODS = "/api/v1/namespaces/default/pods"
MERGE = b"application/merge-patch+json"


def pod(name, node="n1", tolerations=None):
    spec = {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": name}, "spec": spec}


class EvictionDelayTests(SynchronousTestCase):
    taint = {"key": t.NOT_READY, "effect": t.NO_EXECUTE}

    def test_untolerated(self):
        self.assertEqual(eviction_delay([self.taint], []), 0)
        self.assertEqual(eviction_delay([self.taint], [{"key": "other", "operator": "Exists"}]),
                         0)

    def test_for_ever(self):
        self.assertIsNone(eviction_delay([self.taint], [{"operator": "Exists"}]))

    def test_smallest_seconds(self):
        tolerations = [{"key": t.NOT_READY, "operator": "Exists", "tolerationSeconds": 60},
                       {"operator": "Exists", "effect": t.NO_EXECUTE, "tolerationSeconds": 30}]
        self.assertEqual(eviction_delay([self.taint], tolerations), 30)

    def test_value_must_match(self):
        taint = dict(self.taint, value="x")
        self.assertEqual(eviction_delay([taint], [{"key": t.NOT_READY, "value": "y"}]), 0)
        self.assertIsNone(eviction_delay([taint], [{"key": t.NOT_READY, "value": "x"}]))


class TaintEvictionTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.clock = self.api.clock
        self.api.call("POST", NODES, {"metadata": {"name": "n1"}})

    def start(self, controller=TaintEvictionController):
        service = controller(self.api.catalog, self.clock)
        service.startService()
        self.addCleanup(service.stopService)
        self.successResultOf(service.started)
        return service

    def create(self, body):
        code, obj, _ = self.api.call("POST", PODS, body)
        self.assertEqual(code, 201, obj)

    def exists(self, name):
        """Whether the pod is there and not evicted (being deleted gracefully counts as gone)."""
        code, obj, _ = self.api.call("GET", f"{PODS}/{name}")
        return code == 200 and not obj["metadata"].get("deletionTimestamp")

    def taint(self, *taints):
        code, obj, _ = self.api.call("PATCH", f"{NODES}/n1", {"spec": {"taints": list(taints)}},
                                     content_type=MERGE)
        self.assertEqual(code, 200, obj)

    def no_execute(self, key=t.NOT_READY):
        return {"key": key, "effect": t.NO_EXECUTE, "timeAdded": rfc3339(self.clock.seconds())}

    def test_untolerated_evicted_at_once(self):
        """A pod that does not tolerate a NoExecute taint is deleted as it appears."""
        self.start()
        self.create(pod("a"))
        self.create(pod("elsewhere", node="n2"))
        self.taint({"key": "k", "effect": t.NO_SCHEDULE})
        self.assertTrue(self.exists("a"))
        self.taint(self.no_execute())
        self.assertFalse(self.exists("a"))
        self.assertTrue(self.exists("elsewhere"))

    def test_marked_disruption_target_and_budget_not_consulted(self):
        """The pod gets DisruptionTarget (DeletionByTaintManager) and goes despite its budget."""
        self.api.call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", {
            "metadata": {"name": "all"}, "spec": {"minAvailable": 5, "selector": {}}})
        self.start()
        self.create(pod("a"))
        self.taint(self.no_execute())
        code, obj, _ = self.api.call("GET", f"{PODS}/a")
        self.assertEqual(code, 200)
        self.assertTrue(obj["metadata"]["deletionTimestamp"])
        self.assertEqual(obj["status"]["conditions"], [{
            "type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
            "lastTransitionTime": rfc3339(self.clock.seconds()),
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint"}])

    def test_bound_to_tainted_node(self):
        """A pod bound to an already tainted node goes too (found at start as well)."""
        self.taint(self.no_execute())
        self.create(pod("a"))
        self.start()
        self.assertFalse(self.exists("a"))
        self.create(pod("b"))
        self.assertFalse(self.exists("b"))

    def test_toleration_seconds(self):
        """Tolerated for N seconds: deleted N seconds after timeAdded, not before."""
        self.start()
        self.create(pod("a", tolerations=[{"key": t.NOT_READY, "operator": "Exists",
                                           "effect": t.NO_EXECUTE, "tolerationSeconds": 300}]))
        self.create(pod("forever", tolerations=[{"key": t.NOT_READY, "operator": "Exists"}]))
        self.taint(self.no_execute())
        self.clock.advance(299)
        self.assertTrue(self.exists("a"))
        self.clock.advance(1)
        self.assertFalse(self.exists("a"))
        self.assertTrue(self.exists("forever"))

    def test_taint_removed_in_time(self):
        """A taint gone before the toleration runs out leaves the pod alone."""
        self.start()
        self.create(pod("a", tolerations=[{"key": t.NOT_READY, "operator": "Exists",
                                           "effect": "NoExecute", "tolerationSeconds": 60}]))
        self.taint(self.no_execute())
        self.clock.advance(30)
        self.taint()
        self.clock.advance(60)
        self.assertTrue(self.exists("a"))

    def test_pod_eviction_timeout_end_to_end(self):
        """A silent node: Unknown after the grace period, pods gone after the timeout."""
        self.api = APIHarness(plugins=(DefaultTolerationSeconds(300),))
        self.clock = self.api.clock
        self.api.call("POST", NODES, {"metadata": {"name": "n1"}})
        self.start()
        self.start(lambda catalog, clock: NodeLifecycleController(catalog, clock, 40))
        self.create(pod("a"))
        self.clock.advance(40)
        self.assertEqual(self.api.call("GET", f"{NODES}/n1")[1]["spec"]["taints"][0]["key"],
                         t.UNREACHABLE)
        self.clock.advance(299)
        self.assertTrue(self.exists("a"))
        self.clock.advance(1)
        self.assertFalse(self.exists("a"))
