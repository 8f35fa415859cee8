"""The pvc-protection and pv-protection controllers over a whole API server in memory."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.storageprotection import StorageObjectInUseProtection
from orchd.controllers.persistentvolume import PersistentVolumeController
from orchd.controllers.volumeprotection import PVCProtectionController, PVProtectionController
from tests.controllers.test_persistentvolume import CLAIMS, VOLUMES, claim, volume
from tests.support import APIHarness

PODS = "/api/v1/namespaces/default/pods"
MERGE = {b"content-type": [b"application/merge-patch+json"]}


def pod(name, claim_name="data", node="n1"):
    spec = {"containers": [{"name": "c", "image": "nginx"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim_name}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


class VolumeProtectionTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(plugins=(StorageObjectInUseProtection(),))
        for controller in (PVCProtectionController(self.api.catalog, self.api.clock),
                           PVProtectionController(self.api.catalog, self.api.clock)):
            controller.startService()
            self.addCleanup(controller.stopService)
            self.successResultOf(controller.started)

    def settle(self):
        for _ in range(20):
            self.api.clock.advance(0)

    def call(self, method, path, body=None, code=None, headers=None):
        result, obj, _ = self.api.call(method, path, body, headers=headers)
        if code is not None:
            self.assertEqual(result, code, obj)
        self.settle()
        return obj

    def exists(self, path):
        return self.api.call("GET", path)[0] == 200

    def test_unused_claim_goes(self):
        """A claim no pod uses is removed at once when deleted."""
        self.call("POST", CLAIMS, claim(), 201)
        self.call("DELETE", f"{CLAIMS}/data", code=200)
        self.assertFalse(self.exists(f"{CLAIMS}/data"))

    def test_claim_in_use_stays_until_pod_goes(self):
        """A claim a running pod uses stays Terminating until that pod is gone."""
        self.call("POST", CLAIMS, claim(), 201)
        self.call("POST", PODS, pod("user"), 201)
        self.call("POST", PODS, pod("other", claim_name="elsewhere"), 201)
        self.call("DELETE", f"{CLAIMS}/data", code=200)
        stored = self.call("GET", f"{CLAIMS}/data")
        self.assertIn("deletionTimestamp", stored["metadata"])
        self.assertEqual(stored["metadata"]["finalizers"], ["kubernetes.io/pvc-protection"])
        self.call("DELETE", f"{PODS}/other?gracePeriodSeconds=0", code=200)
        self.assertTrue(self.exists(f"{CLAIMS}/data"))
        self.call("DELETE", f"{PODS}/user?gracePeriodSeconds=0", code=200)
        self.assertFalse(self.exists(f"{CLAIMS}/data"))

    def test_finished_or_unplaced_pods_do_not_hold(self):
        """Pods not placed on a node, or finished, do not keep a claim."""
        self.call("POST", CLAIMS, claim(), 201)
        self.call("POST", PODS, pod("pending", node=None), 201)
        self.call("POST", PODS, pod("done"), 201)
        self.call("PATCH", f"{PODS}/done/status", {"status": {"phase": "Succeeded"}}, 200,
                  MERGE)
        self.call("DELETE", f"{CLAIMS}/data", code=200)
        self.assertFalse(self.exists(f"{CLAIMS}/data"))

    def test_pod_finishing_releases(self):
        """A claim held by a pod goes when that pod finishes."""
        self.call("POST", CLAIMS, claim(), 201)
        self.call("POST", PODS, pod("job"), 201)
        self.call("DELETE", f"{CLAIMS}/data", code=200)
        self.assertTrue(self.exists(f"{CLAIMS}/data"))
        self.call("PATCH", f"{PODS}/job/status", {"status": {"phase": "Failed"}}, 200, MERGE)
        self.assertFalse(self.exists(f"{CLAIMS}/data"))

    def test_bound_volume_stays_until_released(self):
        """A bound volume being deleted stays until its claim is gone and it is released."""
        binder = PersistentVolumeController(self.api.catalog, self.api.clock)
        binder.startService()
        self.addCleanup(binder.stopService)
        self.call("POST", VOLUMES, volume("pv1"), 201)
        self.call("POST", CLAIMS, claim(), 201)
        self.assertEqual(self.call("GET", f"{VOLUMES}/pv1")["status"]["phase"], "Bound")
        self.call("DELETE", f"{VOLUMES}/pv1", code=200)
        self.assertTrue(self.exists(f"{VOLUMES}/pv1"))
        self.call("DELETE", f"{CLAIMS}/data", code=200)
        self.assertFalse(self.exists(f"{VOLUMES}/pv1"))

    def test_unbound_volume_goes(self):
        """An Available volume is removed at once when deleted."""
        self.call("POST", VOLUMES, volume("pv1"), 201)
        self.call("DELETE", f"{VOLUMES}/pv1", code=200)
        self.assertFalse(self.exists(f"{VOLUMES}/pv1"))
