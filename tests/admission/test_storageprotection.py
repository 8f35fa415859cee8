"""StorageObjectInUseProtection: new claims and volumes carry their protection finalizer."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.storageprotection import StorageObjectInUseProtection
from tests.support import APIHarness

CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"
SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


class StorageProtectionTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness(plugins=(StorageObjectInUseProtection(),))

    def test_claim_finalizer(self):
        """A new claim gets C{kubernetes.io/pvc-protection} after its own finalizers."""
        code, claim, _ = self.api.call("POST", CLAIMS, {
            "metadata": {"name": "a", "finalizers": ["example.com/x"]}, "spec": SPEC})
        self.assertEqual(code, 201, claim)
        self.assertEqual(claim["metadata"]["finalizers"],
                         ["example.com/x", "kubernetes.io/pvc-protection"])

    def test_volume_finalizer(self):
        """A new volume gets C{kubernetes.io/pv-protection}, once."""
        code, volume, _ = self.api.call("POST", "/api/v1/persistentvolumes", {
            "metadata": {"name": "v", "finalizers": ["kubernetes.io/pv-protection"]},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "hostPath": {"path": "/mnt/v"}}})
        self.assertEqual(code, 201, volume)
        self.assertEqual(volume["metadata"]["finalizers"], ["kubernetes.io/pv-protection"])

    def test_update_untouched(self):
        """A finalizer its owner removed by an update is not put back."""
        self.api.call("POST", CLAIMS, {"metadata": {"name": "a"}, "spec": SPEC})
        code, claim, _ = self.api.call(
            "PATCH", f"{CLAIMS}/a", {"metadata": {"finalizers": None}},
            headers={b"content-type": [b"application/merge-patch+json"]})
        self.assertEqual(code, 200, claim)
        self.assertNotIn("finalizers", claim["metadata"])

    def test_other_kinds_untouched(self):
        """A ConfigMap gets no finalizer."""
        code, cm, _ = self.api.call("POST", "/api/v1/namespaces/default/configmaps",
                                    {"metadata": {"name": "c"}})
        self.assertEqual(code, 201)
        self.assertNotIn("finalizers", cm["metadata"])
