"""VolumeBinding: the scheduler with the persistent-volume binder, over a whole API server."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.persistentvolume import PersistentVolumeController
from orchd.scheduler.podinfo import PodInfo
from orchd.scheduler.scheduler import Scheduler
from tests.controllers.test_persistentvolume import (
    CLAIMS, CLASSES, MERGE, VOLUMES, claim, storage_class, volume,
)
from tests.scheduler.support import node, pod
from tests.support import APIHarness

PODS = "/api/v1/namespaces/default/pods"
NOT_HELPFUL = ("preemption: 0/{0} nodes are available: {0} Preemption is not helpful for "
               "scheduling..")


def on_node(name):
    """A volume node affinity that admits the node C{name} only."""
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "orch.io/hostname", "operator": "In", "values": [name]}]}]}}


def pod_with_claims(name, *claims, **kwargs):
    obj = pod(name, **kwargs)
    del obj["metadata"]["uid"], obj["metadata"]["namespace"]
    obj["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                              for i, c in enumerate(claims)]
    return obj


class PodClaimsTests(SynchronousTestCase):
    def test_claim_names(self):
        """A pod's claims are read once each, in order, other volumes ignored."""
        obj = pod("p")
        obj["spec"]["volumes"] = [
            {"name": "a", "persistentVolumeClaim": {"claimName": "x"}},
            {"name": "b", "emptyDir": {}},
            {"name": "c", "persistentVolumeClaim": {"claimName": "y"}},
            {"name": "d", "persistentVolumeClaim": {"claimName": "x"}},
            {"name": "e", "persistentVolumeClaim": "not an object"}]
        self.assertEqual(PodInfo(obj).claims, ("x", "y"))


class VolumeBindingTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.binder = PersistentVolumeController(self.api.catalog, self.api.clock)
        self.binder.startService()
        self.addCleanup(self.binder.stopService)
        self.successResultOf(self.binder.started)
        self.scheduler = None

    def start(self, **kwargs):
        self.scheduler = Scheduler(self.api.catalog, self.api.clock, **kwargs)
        self.scheduler.startService()
        self.addCleanup(self.scheduler.stopService)
        self.settle()

    def settle(self, seconds=0):
        self.api.clock.advance(seconds)
        for _ in range(50):
            self.api.clock.advance(0)

    def post(self, path, body):
        code, created, _ = self.api.call("POST", path, body)
        self.assertEqual(code, 201, created)
        self.settle()
        return created

    def add_node(self, name, **kwargs):
        obj = node(name, **kwargs)
        self.post("/api/v1/nodes", obj)
        self.assertEqual(self.api.call("PUT", f"/api/v1/nodes/{name}/status", obj)[0], 200)

    def get(self, path):
        code, obj, _ = self.api.call("GET", path)
        return obj if code == 200 else None

    def node_of(self, name):
        return self.get(f"{PODS}/{name}")["spec"].get("nodeName")

    def condition(self, name):
        conditions = (self.get(f"{PODS}/{name}").get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled"), None)

    def message(self, name):
        return self.condition(name)["message"]

    # -- PreFilter ------------------------------------------------------------

    def test_missing_claim(self):
        """A pod whose claim does not exist waits with upstream's message, then runs."""
        self.add_node("n1")
        self.start()
        self.post(PODS, pod_with_claims("web", "data"))
        self.assertEqual(self.message("web"), '0/1 nodes are available: persistentvolumeclaim '
                                              '"data" not found. ' + NOT_HELPFUL.format(1))
        self.post(VOLUMES, volume("pv1"))
        self.post(CLAIMS, claim())
        self.settle(1)
        self.assertEqual(self.node_of("web"), "n1")

    def test_unbound_immediate_claim(self):
        """A pod whose claim of no class is unbound is unschedulable until a volume binds it."""
        self.add_node("n1")
        self.start()
        self.post(CLAIMS, claim())
        self.post(PODS, pod_with_claims("web", "data"))
        self.assertEqual(self.message("web"), "0/1 nodes are available: pod has unbound "
                                              "immediate PersistentVolumeClaims. "
                                              + NOT_HELPFUL.format(1))
        self.assertIsNone(self.node_of("web"))
        self.post(VOLUMES, volume("pv1"))
        self.settle(1)
        self.assertEqual(self.node_of("web"), "n1")

    def test_deleting_claim(self):
        """A pod whose claim is being deleted is unschedulable with upstream's message."""
        self.add_node("n1")
        self.start()
        created = dict(claim(), metadata={"name": "data", "finalizers": ["example.com/hold"]})
        self.post(CLAIMS, created)
        self.api.call("DELETE", f"{CLAIMS}/data")
        self.post(PODS, pod_with_claims("web", "data"))
        self.assertIn('persistentvolumeclaim "data" is being deleted', self.message("web"))

    # -- Filter ---------------------------------------------------------------

    def test_bound_volume_node_affinity(self):
        """A pod follows its bound volume to the node the volume is on, or waits."""
        self.add_node("n1")
        self.add_node("n2", unschedulable=True)
        self.start()
        self.post(VOLUMES, volume("local", nodeAffinity=on_node("n2")))
        self.post(CLAIMS, claim())
        self.post(PODS, pod_with_claims("web", "data"))
        self.assertEqual(self.message("web"), (
            "0/2 nodes are available: 1 node(s) had volume node affinity conflict, "
            "1 node(s) were unschedulable. " + NOT_HELPFUL.format(2)))
        self.api.call("PATCH", "/api/v1/nodes/n2", {"spec": {"unschedulable": False}},
                      headers=MERGE)
        self.settle(1)
        self.assertEqual(self.node_of("web"), "n2")

    def test_no_volume_no_provisioner(self):
        """A waiting claim of hand-made volumes with none fitting rejects every node."""
        self.add_node("n1")
        self.add_node("n2")
        self.post(CLASSES, storage_class("manual", provisioner="kubernetes.io/no-provisioner",
                                         mode="WaitForFirstConsumer"))
        self.start()
        self.post(CLAIMS, claim(class_name="manual"))
        self.post(PODS, pod_with_claims("web", "data"))
        self.assertEqual(self.message("web"), (
            "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to "
            "bind. " + NOT_HELPFUL.format(2)))

    # -- PreBind --------------------------------------------------------------

    def test_static_volume_on_chosen_node(self):
        """A waiting claim is bound to the volume of the node the pod can go to, then the pod."""
        self.add_node("n1")
        self.add_node("n2")
        self.post(CLASSES, storage_class("manual", provisioner="kubernetes.io/no-provisioner",
                                         mode="WaitForFirstConsumer"))
        self.post(VOLUMES, volume("on-n2", class_name="manual", nodeAffinity=on_node("n2")))
        self.start()
        self.post(CLAIMS, claim(class_name="manual"))
        self.assertEqual(self.get(f"{CLAIMS}/data")["status"]["phase"], "Pending")
        self.post(PODS, pod_with_claims("web", "data"))
        self.assertEqual(self.node_of("web"), "n2")
        pv = self.get(f"{VOLUMES}/on-n2")
        self.assertEqual(pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"],
                         "yes")
        self.assertEqual(self.get(f"{CLAIMS}/data")["spec"]["volumeName"], "on-n2")
        self.assertEqual(self.get(f"{CLAIMS}/data")["status"]["phase"], "Bound")

    def test_provisioned_on_chosen_node(self):
        """A claim of a provisioned class gets its volume on the pod's node before the pod binds."""
        self.add_node("n1", cpu="1")
        self.add_node("n2", cpu="8")
        self.post(CLASSES, storage_class("standard", mode="WaitForFirstConsumer"))
        self.start()
        created = self.post(CLAIMS, claim(class_name="standard"))
        self.post(PODS, pod_with_claims("db", "data", cpu="2"))
        self.assertEqual(self.node_of("db"), "n2")
        stored = self.get(f"{CLAIMS}/data")
        self.assertEqual(stored["metadata"]["annotations"]["volume.kubernetes.io/selected-node"],
                         "n2")
        self.assertEqual(stored["status"]["phase"], "Bound")
        pv = self.get(f"{VOLUMES}/pvc-{created['metadata']['uid']}")
        self.assertEqual(pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0][
            "matchFields"][0]["values"], ["n2"])

    def test_two_pods_one_claim(self):
        """A second pod of a claim provisioned for one node goes to that node too."""
        self.add_node("n1")
        self.add_node("n2")
        self.post(CLASSES, storage_class("standard", mode="WaitForFirstConsumer"))
        self.start()
        self.post(CLAIMS, claim(class_name="standard"))
        self.post(PODS, pod_with_claims("a", "data", owner="rs"))
        first = self.node_of("a")
        self.post(PODS, pod_with_claims("b", "data", owner="rs"))
        self.assertEqual(self.node_of("b"), first)

    def test_prebind_times_out(self):
        """A claim nobody provisions fails PreBind after upstream's ten minutes."""
        self.add_node("n1")
        self.post(CLASSES, storage_class("ebs", provisioner="ebs.csi.aws.com",
                                         mode="WaitForFirstConsumer"))
        self.start()
        self.post(CLAIMS, claim(class_name="ebs"))
        self.post(PODS, pod_with_claims("web", "data"))
        self.assertIsNone(self.node_of("web"))
        self.assertEqual(self.get(f"{CLAIMS}/data")["metadata"]["annotations"][
            "volume.kubernetes.io/selected-node"], "n1")
        self.assertIsNone(self.condition("web"))
        self.settle(600)
        condition = self.condition("web")
        self.assertEqual((condition["reason"], condition["message"]), (
            "SchedulerError",
            'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'))

    def test_pod_deleted_during_prebind(self):
        """Deleting a pod whose volumes are being bound ends the wait without an error."""
        self.add_node("n1")
        self.post(CLASSES, storage_class("ebs", provisioner="ebs.csi.aws.com",
                                         mode="WaitForFirstConsumer"))
        self.start()
        self.post(CLAIMS, claim(class_name="ebs"))
        self.post(PODS, pod_with_claims("web", "data"))
        self.assertEqual(self.api.call("DELETE", f"{PODS}/web?gracePeriodSeconds=0")[0], 200)
        self.settle()
        self.assertEqual(self.scheduler._in_flight, 0)
        events = self.get("/api/v1/namespaces/default/events")["items"]
        self.assertEqual([e for e in events if e["reason"] == "FailedScheduling"], [])

    def test_stop_during_prebind(self):
        """Stopping the scheduler ends a PreBind wait and leaves no timer behind."""
        self.add_node("n1")
        self.post(CLASSES, storage_class("ebs", provisioner="ebs.csi.aws.com",
                                         mode="WaitForFirstConsumer"))
        self.start()
        self.post(CLAIMS, claim(class_name="ebs"))
        self.post(PODS, pod_with_claims("web", "data"))
        self.assertEqual(self.scheduler._in_flight, 1)
        self.scheduler.stopService()
        self.settle()
        self.assertEqual(self.scheduler._in_flight, 0)
        self.assertEqual([c for c in self.api.clock.getDelayedCalls()
                          if c.getTime() >= self.api.clock.seconds() + 599], [])
        self.assertIsNone(self.condition("web"))

    def test_volume_made_for_another_node(self):
        """A claim bound meanwhile to a volume of another node sends the pod to that node."""
        self.add_node("n1", cpu="8")
        self.add_node("n2", cpu="1")
        self.post(CLASSES, storage_class("ebs", provisioner="ebs.csi.aws.com",
                                         mode="WaitForFirstConsumer"))
        self.start()
        created = self.post(CLAIMS, claim(class_name="ebs"))
        self.post(PODS, pod_with_claims("web", "data"))
        self.assertEqual(self.get(f"{CLAIMS}/data")["metadata"]["annotations"][
            "volume.kubernetes.io/selected-node"], "n1")
        # What a slow provisioner made for an earlier choice of node.
        self.post(VOLUMES, volume("made-for-n2", class_name="ebs", nodeAffinity=on_node("n2"),
                                  claim_ref={"namespace": "default", "name": "data",
                                             "uid": created["metadata"]["uid"]}))
        self.settle(1)
        self.assertEqual(self.node_of("web"), "n2")
