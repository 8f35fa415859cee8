"""The node lifecycle controller: silent nodes go Unknown; taints follow conditions."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.api import taints as t
from orchd.controllers.nodelifecycle import NodeLifecycleController
from orchd.api.meta import rfc3339
from tests.support import APIHarness

NODES = "/api/v1/nodes"
LEASES = "/apis/coordination.orch.io/v1/namespaces/orch-node-lease/leases"
MERGE = b"application/merge-patch+json"


def micro(seconds):
    return rfc3339(seconds).replace("Z", ".000000Z")


class NodeLifecycleTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.clock = self.api.clock

    def start(self):
        controller = NodeLifecycleController(self.api.catalog, self.clock, 40)
        controller.startService()
        self.addCleanup(controller.stopService)
        self.successResultOf(controller.started)
        return controller

    def create_node(self, name="n1", **conditions):
        code, obj, _ = self.api.call("POST", NODES, {"metadata": {"name": name}})
        self.assertEqual(code, 201, obj)
        self.post_status(name, **conditions)

    def post_status(self, name="n1", **conditions):
        now = rfc3339(self.clock.seconds())
        conds = [{"type": type_, "status": status, "reason": "Orchlet",
                  "lastHeartbeatTime": now, "lastTransitionTime": now}
                 for type_, status in (conditions or {"Ready": "True"}).items()]
        code, obj, _ = self.api.call("PATCH", f"{NODES}/{name}/status",
                                     {"status": {"conditions": conds}}, content_type=MERGE)
        self.assertEqual(code, 200, obj)

    def renew_lease(self, name="n1"):
        body = {"metadata": {"name": name},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                         "renewTime": micro(self.clock.seconds())}}
        code, _, _ = self.api.call("PUT", f"{LEASES}/{name}", body)
        if code == 404:
            code, _, _ = self.api.call("POST", LEASES, body)
        self.assertIn(code, (200, 201))

    def node(self, name="n1"):
        return self.api.call("GET", f"{NODES}/{name}")[1]

    def condition(self, type_="Ready", name="n1"):
        for cond in self.node(name)["status"]["conditions"]:
            if cond["type"] == type_:
                return cond
        return None

    def taints(self, name="n1"):
        return {(x["key"], x["effect"]) for x in self.node(name)["spec"].get("taints", [])}

    def test_unknown_after_grace(self):
        """A node with neither status nor Lease renewal for the grace period is Unknown."""
        self.create_node(MemoryPressure="False")
        self.post_status(Ready="True", MemoryPressure="False")
        controller = self.start()
        self.clock.advance(39)
        self.assertEqual(self.condition()["status"], "True")
        self.clock.advance(1)
        ready = self.condition()
        self.assertEqual((ready["status"], ready["reason"], ready["message"]),
                         ("Unknown", "NodeStatusUnknown", "Orchlet stopped posting node status."))
        self.assertEqual(ready["lastTransitionTime"], rfc3339(self.clock.seconds()))
        self.assertEqual(self.condition("MemoryPressure")["reason"], "NodeStatusUnknown")
        # Conditions never posted are added as upstream does.
        self.assertEqual(self.condition("DiskPressure")["reason"], "NodeStatusNeverUpdated")
        self.assertEqual(self.taints(), {(t.UNREACHABLE, t.NO_SCHEDULE),
                                         (t.UNREACHABLE, t.NO_EXECUTE)})
        self.assertEqual(controller._queue.delayed(), set())     # no polling once Unknown

    def pod(self, name, node="n1", ready="True"):
        pods = "/api/v1/namespaces/default/pods"
        code, obj, _ = self.api.call("POST", pods, {"metadata": {"name": name}, "spec": {
            "nodeName": node, "containers": [{"name": "c", "image": "nginx"}]}})
        self.assertEqual(code, 201, obj)
        self.api.call("PATCH", f"{pods}/{name}/status", {"status": {"phase": "Running",
                                                                    "conditions": [
            {"type": "Ready", "status": ready, "lastTransitionTime": rfc3339(0)}]}},
            content_type=MERGE)

    def pod_ready(self, name):
        pod = self.api.call("GET", f"/api/v1/namespaces/default/pods/{name}")[1]
        [ready] = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
        return ready["status"], ready["lastTransitionTime"]

    def test_pods_of_a_node_gone_unknown_are_marked_not_ready(self):
        """A node falling silent has its ready pods marked Ready=False, with an event."""
        self.create_node()
        self.create_node("n2")
        self.pod("a")
        self.pod("b", ready="False")
        self.pod("elsewhere", node="n2")
        self.start()
        self.clock.advance(30)
        self.post_status("n2")
        self.assertEqual(self.pod_ready("a"), ("True", rfc3339(0)))
        self.clock.advance(10)
        self.assertEqual(self.condition()["status"], "Unknown")
        self.assertEqual(self.pod_ready("a"), ("False", rfc3339(self.clock.seconds())))
        self.assertEqual(self.pod_ready("b"), ("False", rfc3339(0)))
        self.assertEqual(self.pod_ready("elsewhere"), ("True", rfc3339(0)))
        self.clock.advance(0)
        events = self.api.call("GET", "/api/v1/namespaces/default/events")[1]["items"]
        self.assertEqual([(e["involvedObject"]["name"], e["reason"], e["message"])
                          for e in events], [("a", "NodeNotReady", "Node is not ready")])

    def test_node_reporting_not_ready_marks_its_pods(self):
        """An orchlet posting Ready=False has its pods marked not ready too."""
        self.create_node()
        self.pod("a")
        self.start()
        self.post_status(Ready="False")
        self.assertEqual(self.pod_ready("a")[0], "False")

    def test_lease_renewals_keep_ready(self):
        """Lease renewals alone keep a node Ready; the timer moves with each."""
        self.create_node()
        self.renew_lease()
        self.start()
        for _ in range(5):
            self.clock.advance(30)
            self.renew_lease()
        self.assertEqual(self.condition()["status"], "True")
        self.clock.advance(40)
        self.assertEqual(self.condition()["status"], "Unknown")

    def test_renewals_do_not_sync_each_time(self):
        """Renewals every 10 s of a healthy node cost one sync per grace period, no write."""
        self.create_node()
        self.renew_lease()
        controller = self.start()
        synced = []
        sync = controller._sync

        def counting(name):
            synced.append(self.clock.seconds())
            return sync(name)
        controller._sync = counting
        version = self.node()["metadata"]["resourceVersion"]
        for _ in range(12):
            self.clock.advance(10)
            self.renew_lease()
        self.assertLessEqual(len(synced), 4)
        self.assertEqual(self.node()["metadata"]["resourceVersion"], version)
        self.assertEqual(self.condition()["status"], "True")
        self.clock.advance(40)
        self.assertEqual(self.condition()["status"], "Unknown")

    def test_renewal_after_unknown_watches_again(self):
        """A node marked Unknown whose Lease is renewed again is judged again when it stops."""
        self.create_node()
        self.renew_lease()
        self.start()
        self.clock.advance(40)
        self.assertEqual(self.condition()["status"], "Unknown")
        self.post_status()
        self.renew_lease()
        self.assertEqual(self.condition()["status"], "True")
        self.assertEqual(self.taints(), set())
        self.clock.advance(39)
        self.assertEqual(self.condition()["status"], "True")
        self.clock.advance(1)
        self.assertEqual(self.condition()["status"], "Unknown")

    def test_status_posts_keep_ready(self):
        """New heartbeats in the Ready condition keep a node Ready, and bring it back."""
        self.create_node()
        self.start()
        self.clock.advance(30)
        self.post_status()
        self.clock.advance(30)
        self.assertEqual(self.condition()["status"], "True")
        self.clock.advance(10)
        self.assertEqual(self.condition()["status"], "Unknown")
        self.post_status()
        self.assertEqual(self.condition()["status"], "True")
        self.assertEqual(self.taints(), set())

    def test_not_ready_taints(self):
        """Ready=False taints not-ready (NoSchedule, NoExecute with timeAdded); True clears."""
        self.create_node(Ready="False")
        self.start()
        self.assertEqual(self.taints(), {(t.NOT_READY, t.NO_SCHEDULE),
                                         (t.NOT_READY, t.NO_EXECUTE)})
        taints = {x["effect"]: x for x in self.node()["spec"]["taints"]}
        self.assertEqual(taints[t.NO_EXECUTE]["timeAdded"], rfc3339(self.clock.seconds()))
        self.assertNotIn("timeAdded", taints[t.NO_SCHEDULE])
        self.post_status(Ready="True")
        self.assertEqual(self.taints(), set())

    def test_pressure_and_unschedulable_taints(self):
        """Pressure conditions and spec.unschedulable give NoSchedule taints; others stay."""
        self.create_node(Ready="True", MemoryPressure="True", DiskPressure="False",
                         PIDPressure="True", NetworkUnavailable="True")
        self.api.call("PATCH", f"{NODES}/n1", {"spec": {"unschedulable": True, "taints": [
            {"key": "example.com/mine", "effect": "NoSchedule"}]}}, content_type=MERGE)
        self.start()
        self.assertEqual(self.taints(), {
            (t.MEMORY_PRESSURE, t.NO_SCHEDULE), (t.PID_PRESSURE, t.NO_SCHEDULE),
            (t.NETWORK_UNAVAILABLE, t.NO_SCHEDULE), (t.UNSCHEDULABLE, t.NO_SCHEDULE),
            ("example.com/mine", t.NO_SCHEDULE)})
        self.post_status(Ready="True", MemoryPressure="False", DiskPressure="True")
        self.api.call("PATCH", f"{NODES}/n1", {"spec": {"unschedulable": None}},
                      content_type=MERGE)
        self.assertEqual(self.taints(), {(t.DISK_PRESSURE, t.NO_SCHEDULE),
                                         ("example.com/mine", t.NO_SCHEDULE)})

    def test_unreachable_replaces_not_ready(self):
        """A not-ready node that falls silent swaps not-ready for unreachable."""
        self.create_node(Ready="False")
        self.start()
        self.clock.advance(40)
        self.assertEqual(self.taints(), {(t.UNREACHABLE, t.NO_SCHEDULE),
                                         (t.UNREACHABLE, t.NO_EXECUTE)})

    def test_deleted_node_forgotten(self):
        """A deleted node leaves no state and no write behind."""
        controller = self.start()
        self.create_node()
        self.api.call("DELETE", f"{NODES}/n1")
        self.clock.advance(40)
        self.assertEqual(controller._health, {})


class SelectionTests(SynchronousTestCase):
    def test_on_by_default(self):
        from orchd.controllers.manager import selected_controllers

        chosen = selected_controllers(("*",))
        for name in ("nodelifecycle", "taint-eviction-controller", "podgc"):
            self.assertIn(name, chosen)
