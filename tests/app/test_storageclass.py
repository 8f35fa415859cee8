"""The default StorageClass written at start."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.admission.defaultstorageclass import DefaultStorageClass
from orchd.app.storageclass import ensure_default_storage_class
from orchd.storage.memory import MemoryStore
from tests.support import APIHarness

CLASSES = "/apis/storage.orch.io/v1/storageclasses"
CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"


class DefaultStorageClassTests(SynchronousTestCase):
    def setUp(self):
        store = MemoryStore()
        self.api = APIHarness(store=store, plugins=(DefaultStorageClass(store),))

    def ensure(self):
        return self.api.run(ensure_default_storage_class(self.api.catalog))

    def names(self):
        return [c["metadata"]["name"] for c in self.api.call("GET", CLASSES)[1]["items"]]

    def test_created_when_none(self):
        """With no class, C{standard} is made: default, built in, waiting for a consumer."""
        self.assertTrue(self.ensure())
        code, created, _ = self.api.call("GET", CLASSES + "/standard")
        self.assertEqual(code, 200)
        self.assertEqual(created["metadata"]["annotations"], {
            "storageclass.orch.io/is-default-class": "true",
            "storageclass.kubernetes.io/is-default-class": "true"})
        self.assertEqual((created["provisioner"], created["reclaimPolicy"],
                          created["volumeBindingMode"]),
                         ("orch.io/host-path", "Delete", "WaitForFirstConsumer"))

    def test_claims_get_it(self):
        """A claim made without a class after start names C{standard}."""
        self.ensure()
        code, claim, _ = self.api.call("POST", CLAIMS, {
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}})
        self.assertEqual(code, 201, claim)
        self.assertEqual(claim["spec"]["storageClassName"], "standard")

    def test_second_start_writes_nothing(self):
        """A restart finds its own default and writes nothing."""
        self.assertTrue(self.ensure())
        self.assertFalse(self.ensure())
        self.assertEqual(self.names(), ["standard"])

    def test_other_default_kept(self):
        """A class the administrator made default (upstream spelling) is left as the only one."""
        self.api.call("POST", CLASSES, {
            "metadata": {"name": "local-path", "annotations": {
                "storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path"})
        self.assertFalse(self.ensure())
        self.assertEqual(self.names(), ["local-path"])

    def test_standard_not_default_kept(self):
        """An existing C{standard} class that is not default is not overwritten."""
        self.api.call("POST", CLASSES, {"metadata": {"name": "standard"},
                                        "provisioner": "example.org/disk"})
        self.assertFalse(self.ensure())
        stored = self.api.call("GET", CLASSES + "/standard")[1]
        self.assertEqual(stored["provisioner"], "example.org/disk")
        self.assertNotIn("annotations", stored["metadata"])

    def test_storage_group_off(self):
        """With the storage group switched off there is nothing to write."""
        self.api = APIHarness(runtime_config="storage.orch.io/v1=false")
        self.assertFalse(self.ensure())
