"""PersistentVolumes and claims: upstream's defaults and a new one's status."""

from twisted.trial.unittest import SynchronousTestCase

from tests.support import APIHarness

PVS = "/api/v1/persistentvolumes"
PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"


class VolumeTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()

    def test_volume(self):
        """A volume gets Retain and Filesystem and starts Pending, stamped; sizes are canonical."""
        code, pv, _ = self.api.call("POST", PVS, {"metadata": {"name": "pv"}, "spec": {
            "capacity": {"storage": "1024Mi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/pv"}}, "status": {"phase": "Bound"}})
        self.assertEqual(code, 201, pv)
        self.assertEqual((pv["spec"]["persistentVolumeReclaimPolicy"], pv["spec"]["volumeMode"],
                          pv["spec"]["capacity"]), ("Retain", "Filesystem", {"storage": "1Gi"}))
        self.assertEqual(pv["status"], {"phase": "Pending",
                                        "lastPhaseTransitionTime": "2023-11-14T22:13:20Z"})

    def test_claim(self):
        """A claim gets Filesystem and starts Pending; a size that is no quantity is a 400."""
        body = {"metadata": {"name": "c"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "0.5Gi"}}}}
        code, pvc, _ = self.api.call("POST", PVCS, body)
        self.assertEqual(code, 201, pvc)
        self.assertEqual((pvc["spec"]["volumeMode"], pvc["status"]), ("Filesystem",
                                                                       {"phase": "Pending"}))
        self.assertEqual(pvc["spec"]["resources"]["requests"], {"storage": "512Mi"})
        body["metadata"]["name"] = "d"
        body["spec"]["resources"]["requests"]["storage"] = "big"
        code, status, _ = self.api.call("POST", PVCS, body)
        self.assertEqual(code, 400)
        self.assertTrue(status["message"].startswith(
            'PersistentVolumeClaim in version "v1" cannot be handled as a '
            "PersistentVolumeClaim: quantities must match"))
