"""The persistent-volume binder over a whole API server in memory, on a Clock."""

from twisted.trial.unittest import SynchronousTestCase

from orchd.controllers.persistentvolume import PersistentVolumeController
from tests.support import APIHarness

CLAIMS = "/api/v1/namespaces/default/persistentvolumeclaims"
VOLUMES = "/api/v1/persistentvolumes"
CLASSES = "/apis/storage.orch.io/v1/storageclasses"
EVENTS = "/api/v1/namespaces/default/events"
MERGE = {b"content-type": [b"application/merge-patch+json"]}


def volume(name, size="1Gi", modes=("ReadWriteOnce",), class_name="", labels=None,
           claim_ref=None, policy=None, **spec):
    body = dict({"capacity": {"storage": size}, "accessModes": list(modes),
                 "hostPath": {"path": f"/mnt/{name}"}}, **spec)
    if class_name:
        body["storageClassName"] = class_name
    if claim_ref is not None:
        body["claimRef"] = claim_ref
    if policy is not None:
        body["persistentVolumeReclaimPolicy"] = policy
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": labels or {}}, "spec": body}


def claim(name="data", size="1Gi", modes=("ReadWriteOnce",), class_name="", **spec):
    body = dict({"accessModes": list(modes), "resources": {"requests": {"storage": size}}},
                **spec)
    if class_name is not None:
        body["storageClassName"] = class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": body}


def storage_class(name, provisioner="orch.io/host-path", mode="Immediate", policy="Delete",
                  **fields):
    return dict({"apiVersion": "storage.orch.io/v1", "kind": "StorageClass",
                 "metadata": {"name": name}, "provisioner": provisioner,
                 "volumeBindingMode": mode, "reclaimPolicy": policy}, **fields)


class PersistentVolumeControllerTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.controller = PersistentVolumeController(self.api.catalog, self.api.clock)
        self.controller.startService()
        self.addCleanup(self.controller.stopService)
        self.successResultOf(self.controller.started)

    def settle(self):
        for _ in range(20):
            self.api.clock.advance(0)

    def post(self, path, body):
        code, created, _ = self.api.call("POST", path, body)
        self.assertEqual(code, 201, created)
        self.settle()
        return created

    def get(self, path):
        code, obj, _ = self.api.call("GET", path)
        return obj if code == 200 else None

    def claim(self, name="data"):
        return self.get(f"{CLAIMS}/{name}")

    def volume(self, name):
        return self.get(f"{VOLUMES}/{name}")

    def events(self, reason=None):
        self.settle()
        items = self.get(EVENTS)["items"]
        return [(e["type"], e["reason"], e["message"]) for e in items
                if reason is None or e["reason"] == reason]

    def assert_bound(self, claim_name, volume_name, volume_chosen=True, claim_chosen=True):
        """Bound both ways; C{*_chosen}: this controller set that side's reference."""
        pvc, pv = self.claim(claim_name), self.volume(volume_name)
        self.assertEqual(pvc["spec"]["volumeName"], volume_name)
        self.assertEqual(pvc["status"]["phase"], "Bound")
        self.assertEqual(pvc["status"]["capacity"], pv["spec"]["capacity"])
        self.assertEqual(pvc["status"]["accessModes"], pv["spec"]["accessModes"])
        self.assertEqual(pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"], "yes")
        self.assertEqual(pv["spec"]["claimRef"]["uid"], pvc["metadata"]["uid"])
        self.assertEqual(pv["status"]["phase"], "Bound")
        self.assertEqual("pv.kubernetes.io/bound-by-controller" in pv["metadata"].get(
            "annotations", {}), volume_chosen)
        self.assertEqual("pv.kubernetes.io/bound-by-controller" in pvc["metadata"].get(
            "annotations", {}), claim_chosen)

    # -- binding to volumes that exist ----------------------------------------

    def test_new_volume_available(self):
        """A volume with no claim goes from Pending to Available, with the time of the change."""
        self.post(VOLUMES, volume("pv1"))
        status = self.volume("pv1")["status"]
        self.assertEqual(status["phase"], "Available")
        self.assertIn("lastPhaseTransitionTime", status)

    def test_smallest_fitting_volume(self):
        """A claim binds to the smallest Available volume at least its size."""
        for name, size in (("big", "10Gi"), ("small", "512Mi"), ("fits", "2Gi")):
            self.post(VOLUMES, volume(name, size))
        self.post(CLAIMS, claim(size="1Gi"))
        self.assert_bound("data", "fits")
        self.assertEqual(self.volume("big")["status"]["phase"], "Available")

    def test_access_modes_class_and_selector(self):
        """Volumes lacking an access mode, of another class or not selected are passed over."""
        self.post(VOLUMES, volume("rox", modes=("ReadOnlyMany",)))
        self.post(VOLUMES, volume("classy", class_name="fast"))
        self.post(VOLUMES, volume("unlabelled"))
        self.post(VOLUMES, volume("labelled", size="5Gi", labels={"tier": "db"}))
        self.post(CLAIMS, claim(selector={"matchLabels": {"tier": "db"}}))
        self.assert_bound("data", "labelled")

    def test_no_class_no_volume(self):
        """A claim of no class with nothing to bind stays Pending with upstream's event."""
        self.post(CLAIMS, claim())
        self.assertEqual(self.claim()["status"]["phase"], "Pending")
        self.assertEqual(self.events("FailedBinding"), [(
            "Normal", "FailedBinding",
            "no persistent volumes available for this claim and no storage class is set")])

    def test_volume_added_later(self):
        """A Pending claim binds once a fitting volume appears."""
        self.post(CLAIMS, claim())
        self.post(VOLUMES, volume("late"))
        self.assert_bound("data", "late")

    def test_claim_names_volume(self):
        """A claim naming its volume binds to it even when a better fit exists."""
        self.post(VOLUMES, volume("exact"))
        self.post(VOLUMES, volume("chosen", size="8Gi"))
        self.post(CLAIMS, claim(volumeName="chosen"))
        self.assert_bound("data", "chosen", claim_chosen=False)

    def test_claim_names_unfit_volume(self):
        """A claim naming a volume too small for it stays Pending with VolumeMismatch."""
        self.post(VOLUMES, volume("tiny", size="1Mi"))
        self.post(CLAIMS, claim(volumeName="tiny"))
        self.assertEqual(self.claim()["status"]["phase"], "Pending")
        self.assertEqual(self.events("VolumeMismatch"), [(
            "Warning", "VolumeMismatch",
            'Cannot bind to requested volume "tiny": requested PV is too small')])
        self.assertNotIn("claimRef", self.volume("tiny")["spec"])

    def test_volume_names_claim(self):
        """A volume pre-bound to a claim by name goes to that claim only."""
        self.post(VOLUMES, volume("reserved", claim_ref={"namespace": "default",
                                                         "name": "mine"}))
        self.post(CLAIMS, claim("other"))
        self.assertEqual(self.claim("other")["status"]["phase"], "Pending")
        self.post(CLAIMS, claim("mine"))
        self.assert_bound("mine", "reserved", volume_chosen=False)

    # -- provisioning ---------------------------------------------------------

    def test_immediate_provisioning(self):
        """A claim of an Immediate class of the built-in provisioner gets a volume of its own."""
        self.post(CLASSES, storage_class("fast", mountOptions=["noatime"],
                                         parameters={"path": "/data/vols"}))
        created = self.post(CLAIMS, claim(size="3Gi", class_name="fast",
                                          modes=("ReadWriteOnce", "ReadOnlyMany")))
        name = f"pvc-{created['metadata']['uid']}"
        pv = self.volume(name)
        self.assertEqual(pv["spec"]["capacity"], {"storage": "3Gi"})
        self.assertEqual(pv["spec"]["hostPath"], {"path": f"/data/vols/{name}_default_data",
                                                  "type": "DirectoryOrCreate"})
        self.assertEqual(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete")
        self.assertEqual(pv["spec"]["mountOptions"], ["noatime"])
        self.assertEqual(pv["spec"]["storageClassName"], "fast")
        self.assertNotIn("nodeAffinity", pv["spec"])
        self.assertEqual(pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
                         "orch.io/host-path")
        self.assert_bound("data", name)
        self.assertEqual(self.claim()["metadata"]["annotations"][
            "volume.kubernetes.io/storage-provisioner"], "orch.io/host-path")
        self.assertEqual(self.events("ProvisioningSucceeded"), [(
            "Normal", "ProvisioningSucceeded",
            f"Successfully provisioned volume {name} using orch.io/host-path")])

    def test_existing_volume_before_provisioning(self):
        """A fitting volume of the class is bound rather than a new one made."""
        self.post(CLASSES, storage_class("fast"))
        self.post(VOLUMES, volume("static", class_name="fast"))
        self.post(CLAIMS, claim(class_name="fast"))
        self.assert_bound("data", "static")
        self.assertEqual(len(self.get(VOLUMES)["items"]), 1)

    def test_wait_for_first_consumer(self):
        """A WaitForFirstConsumer claim waits for its node, then gets a volume on that node."""
        self.post(CLASSES, storage_class("local", mode="WaitForFirstConsumer"))
        self.post(VOLUMES, volume("static", class_name="local"))
        created = self.post(CLAIMS, claim(class_name="local"))
        self.assertEqual(self.claim()["status"]["phase"], "Pending")
        self.assertEqual(self.events("WaitForFirstConsumer"), [(
            "Normal", "WaitForFirstConsumer",
            "waiting for first consumer to be created before binding")])
        self.assertEqual(self.volume("static")["status"]["phase"], "Available")
        code, _, _ = self.api.call("PATCH", f"{CLAIMS}/data", {"metadata": {"annotations": {
            "volume.kubernetes.io/selected-node": "node-2"}}}, headers=MERGE)
        self.assertEqual(code, 200)
        self.settle()
        name = f"pvc-{created['metadata']['uid']}"
        self.assertEqual(self.volume(name)["spec"]["nodeAffinity"], {"required": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}]}})
        self.assert_bound("data", name)

    def test_external_provisioner(self):
        """A claim of another provisioner's class is annotated for it and waits."""
        self.post(CLASSES, storage_class("ebs", provisioner="ebs.csi.aws.com"))
        self.post(CLAIMS, claim(class_name="ebs"))
        annotations = self.claim()["metadata"]["annotations"]
        self.assertEqual(annotations["volume.kubernetes.io/storage-provisioner"],
                         "ebs.csi.aws.com")
        self.assertEqual(annotations["volume.beta.kubernetes.io/storage-provisioner"],
                         "ebs.csi.aws.com")
        [(kind, _, message)] = self.events("ExternalProvisioning")
        self.assertIn("the external provisioner 'ebs.csi.aws.com'", message)
        self.assertEqual(self.get(VOLUMES)["items"], [])

    def test_missing_class(self):
        """A claim naming a class that does not exist waits with ProvisioningFailed."""
        self.post(CLAIMS, claim(class_name="ghost"))
        self.assertEqual(self.events("ProvisioningFailed"), [(
            "Warning", "ProvisioningFailed", 'storageclass.storage.orch.io "ghost" not found')])

    def test_class_added_later(self):
        """A claim whose class appears later is provisioned then."""
        self.post(CLAIMS, claim(class_name="late"))
        self.post(CLASSES, storage_class("late"))
        self.assertEqual(self.claim()["status"]["phase"], "Bound")

    def test_no_provisioner_class(self):
        """A class of hand-made volumes provisions nothing."""
        self.post(CLASSES, storage_class("manual", provisioner="kubernetes.io/no-provisioner"))
        self.post(CLAIMS, claim(class_name="manual"))
        self.assertEqual(self.get(VOLUMES)["items"], [])
        self.assertEqual(self.events("ProvisioningFailed"), [(
            "Warning", "ProvisioningFailed",
            "no volume plugin matched name: kubernetes.io/no-provisioner")])

    # -- claims going away ----------------------------------------------------

    def test_delete_policy_removes_provisioned(self):
        """A provisioned volume with the Delete policy goes with its claim."""
        self.post(CLASSES, storage_class("fast"))
        created = self.post(CLAIMS, claim(class_name="fast"))
        name = f"pvc-{created['metadata']['uid']}"
        self.assertIsNotNone(self.volume(name))
        self.assertEqual(self.api.call("DELETE", f"{CLAIMS}/data")[0], 200)
        self.settle()
        self.assertIsNone(self.volume(name))

    def test_retain_policy_releases(self):
        """A volume with the Retain policy is Released when its claim goes, and not reused."""
        self.post(VOLUMES, volume("keep"))
        self.post(CLAIMS, claim())
        self.assert_bound("data", "keep")
        self.api.call("DELETE", f"{CLAIMS}/data")
        self.settle()
        self.assertEqual(self.volume("keep")["status"]["phase"], "Released")
        self.post(CLAIMS, claim("again"))
        self.assertEqual(self.claim("again")["status"]["phase"], "Pending")

    def test_released_made_available(self):
        """An administrator clearing a Released volume's claimRef makes it Available again."""
        self.post(VOLUMES, volume("keep"))
        self.post(CLAIMS, claim())
        self.api.call("DELETE", f"{CLAIMS}/data")
        self.settle()
        self.api.call("PATCH", f"{VOLUMES}/keep", {"spec": {"claimRef": None}}, headers=MERGE)
        self.settle()
        self.assertEqual(self.volume("keep")["status"]["phase"], "Available")

    def test_delete_policy_without_deleter(self):
        """A hand-made volume with the Delete policy fails when released: nothing can delete it."""
        self.post(VOLUMES, volume("manual", policy="Delete"))
        self.post(CLAIMS, claim())
        self.api.call("DELETE", f"{CLAIMS}/data")
        self.settle()
        status = self.volume("manual")["status"]
        self.assertEqual(status["phase"], "Failed")
        self.assertEqual(status["message"], 'error getting deleter volume plugin for volume '
                                            '"manual": no deletable volume plugin matched')

    def test_lost_volume(self):
        """A bound claim whose volume is deleted is Lost, with upstream's event."""
        self.post(VOLUMES, volume("gone"))
        self.post(CLAIMS, claim())
        self.api.call("DELETE", f"{VOLUMES}/gone")
        self.settle()
        self.assertEqual(self.claim()["status"]["phase"], "Lost")
        self.assertEqual(self.events("ClaimLost"), [(
            "Warning", "ClaimLost",
            "Bound claim has lost its PersistentVolume. Data on the volume is lost!")])
        self.assertNotIn("capacity", self.claim()["status"])

    def test_default_class_assigned_later(self):
        """A claim made while no class was default gets the default once one is made."""
        self.post(CLAIMS, claim(class_name=None))
        self.post(CLAIMS, claim("none", class_name=""))
        self.assertNotIn("storageClassName", self.claim()["spec"])
        self.post(CLASSES, dict(storage_class("std"), metadata={
            "name": "std", "annotations": {"storageclass.orch.io/is-default-class": "true"}}))
        stored = self.claim()
        self.assertEqual(stored["spec"]["storageClassName"], "std")
        self.assertEqual(stored["status"]["phase"], "Bound")
        self.assertEqual(self.claim("none")["spec"]["storageClassName"], "")

    def test_unset_class_binds_classless_volume(self):
        """A claim of no class still takes a volume of no class before the default applies."""
        self.post(CLASSES, dict(storage_class("std"), metadata={
            "name": "std", "annotations": {"storageclass.orch.io/is-default-class": "true"}}))
        self.post(VOLUMES, volume("plain"))
        self.post(CLAIMS, claim(class_name=None))
        self.assert_bound("data", "plain")
        self.assertNotIn("storageClassName", self.claim()["spec"])

    def test_lagging_volume_informer_not_lost(self):
        """A bound claim whose volume the informer has not seen yet is not called Lost."""
        self.post(VOLUMES, volume("pv1"))
        self.post(CLAIMS, claim())
        self.controller._volume_informer.cache.clear()
        self.api.call("PATCH", f"{CLAIMS}/data", {"metadata": {"labels": {"x": "y"}}},
                      headers=MERGE)
        self.settle()
        self.assertEqual(self.claim()["status"]["phase"], "Bound")
        self.assertEqual(self.events("ClaimLost"), [])
