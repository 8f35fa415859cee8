"""
Claims that bind, against a real server with its scheduler, controllers and
two simulated nodes: the default StorageClass made at start, a pod whose
claim names no class gets Running with the claim Bound to a volume
provisioned on the pod's node, the volume goes with its claim; kubectl and
the official Python client read all three kinds.
"""

import json
import os

from twisted.internet import threads
from twisted.trial.unittest import SkipTest, TestCase

from tests.integration.support import sleep
from tests.integration.test_kubectl import KubectlMixin

try:
    import kubernetes
except ImportError:     # the test extra is not installed
    kubernetes = None

CLAIM = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
         "spec": {"accessModes": ["ReadWriteOnce"],
                  "resources": {"requests": {"storage": "2Gi"}}}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db"},
       "spec": {"containers": [{"name": "db", "image": "postgres:16",
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}


class VolumeTests(KubectlMixin, TestCase):
    timeout = 120
    server_settings = {"no_orchlet": False, "simulated_nodes": 2}

    async def until(self, check, what, seconds=30):
        for _ in range(int(seconds / 0.1)):
            result = await check()
            if result:
                return result
            await sleep(0.1)
        self.fail(f"timed out waiting for {what}")

    async def volumes(self):
        return (await self.get_json("pv"))["items"]

    async def test_claim_of_default_class_binds(self):
        """A pod with a claim of no class runs; the claim is Bound to a volume on its node."""
        _, out, _ = await self.kubectl("get", "storageclass", "--no-headers")
        [row] = [line.split() for line in out.splitlines() if line.strip()]
        self.assertEqual(row[:5], ["standard", "(default)", "orch.io/host-path", "Delete",
                                   "WaitForFirstConsumer"])
        await self.kubectl("apply", "-f", "-", stdin=[CLAIM, POD])
        _, out, _ = await self.kubectl("wait", "--for=condition=Ready", "pod/db",
                                       "--timeout=60s")
        self.assertIn("condition met", out)
        _, out, _ = await self.kubectl("get", "pvc", "data", "--no-headers")
        columns = out.split()
        self.assertEqual((columns[0], columns[1]), ("data", "Bound"))
        self.assertEqual(columns[3:6], ["2Gi", "RWO", "standard"])
        claim = await self.get_json("pvc", "data")
        pod = await self.get_json("pod", "db")
        pv = await self.get_json("pv", claim["spec"]["volumeName"])
        self.assertEqual(claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"],
                         pod["spec"]["nodeName"])
        self.assertEqual(pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0][
            "matchFields"][0]["values"], [pod["spec"]["nodeName"]])
        self.assertEqual(pv["status"]["phase"], "Bound")
        _, out, _ = await self.kubectl("get", "events", "--field-selector",
                                       "involvedObject.name=data", "-o", "json")
        reasons = {e["reason"] for e in json.loads(out)["items"]}
        self.assertIn("ProvisioningSucceeded", reasons)

        await self.kubectl("delete", "pod", "db", "--grace-period=0", "--force")
        await self.kubectl("delete", "pvc", "data")

        async def gone():
            return not await self.volumes()
        await self.until(gone, "the volume to be deleted with its claim")

    async def test_claims_per_pod_and_protection(self):
        """Three pods with a claim each run, each volume on its pod's node; a claim in use stays."""
        objects = []
        for i in range(3):
            claim = dict(CLAIM, metadata={"name": f"www-web-{i}"})
            pod = json.loads(json.dumps(POD))
            pod["metadata"] = {"name": f"web-{i}", "labels": {"app": "web"}}
            pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] = f"www-web-{i}"
            objects += [claim, pod]
        await self.kubectl("apply", "-f", "-", stdin=objects)
        await self.kubectl("wait", "--for=condition=Ready", "pod", "-l", "app=web",
                           "--timeout=60s")
        for i in range(3):
            claim = await self.get_json("pvc", f"www-web-{i}")
            pod = await self.get_json("pod", f"web-{i}")
            self.assertEqual(claim["status"]["phase"], "Bound")
            pv = await self.get_json("pv", claim["spec"]["volumeName"])
            self.assertEqual(pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0][
                "matchFields"][0]["values"], [pod["spec"]["nodeName"]])

        await self.kubectl("delete", "pvc", "www-web-0", "--wait=false")
        _, out, _ = await self.kubectl("get", "pvc", "www-web-0", "--no-headers")
        self.assertEqual(out.split()[1], "Terminating")
        await self.kubectl("delete", "pod", "web-0", "--grace-period=0", "--force")
        await self.kubectl("wait", "--for=delete", "pvc/www-web-0", "--timeout=30s")

        async def two_left():
            return len(await self.volumes()) == 2
        await self.until(two_left, "the volume of the deleted claim to go")

    async def test_local_node_directory(self):
        """A volume on the node of the server's own agent is a directory under its data dir."""
        local = self.server.config.node_name
        pod = json.loads(json.dumps(POD))
        pod["spec"]["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchFields": [{"key": "metadata.name", "operator": "In",
                                 "values": [local]}]}]}}}
        await self.kubectl("apply", "-f", "-", stdin=[CLAIM, pod])
        await self.kubectl("wait", "--for=condition=Ready", "pod/db", "--timeout=60s")
        claim = await self.get_json("pvc", "data")
        pv = await self.get_json("pv", claim["spec"]["volumeName"])
        path = pv["spec"]["hostPath"]["path"]
        self.assertEqual(path, os.path.join(os.path.abspath(self.server.data_dir), "volumes",
                                            pv["metadata"]["name"]))
        self.assertTrue(os.path.isdir(path))
        await self.kubectl("delete", "pod", "db", "--grace-period=0", "--force")
        await self.kubectl("delete", "pvc", "data")

        async def removed():
            return not os.path.exists(path) and not await self.volumes()
        await self.until(removed, "the directory and the volume to go")

    async def test_python_client_reads_bound_objects(self):
        """The official client's models accept a bound claim, its volume and the default class."""
        if kubernetes is None:
            raise SkipTest("the kubernetes package (the test extra) is not installed")
        await self.kubectl("apply", "-f", "-", stdin=[CLAIM, POD])
        await self.kubectl("wait", "--for=jsonpath={.status.phase}=Bound", "pvc/data",
                           "--timeout=60s")
        configuration = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(
            config_file=self.server.plane.pki.admin_orchconfig_path,
            client_configuration=configuration)
        client = kubernetes.client.ApiClient(configuration)
        self.addCleanup(client.close)

        def read():
            core = kubernetes.client.CoreV1Api(client)
            storage = kubernetes.client.StorageV1Api(client)
            claim = core.read_namespaced_persistent_volume_claim("data", "default")
            volume = core.read_persistent_volume(claim.spec.volume_name)
            classes = storage.list_storage_class()
            return claim, volume, classes

        claim, volume, classes = await threads.deferToThread(read)
        self.assertEqual((claim.status.phase, claim.status.capacity), ("Bound", {"storage": "2Gi"}))
        self.assertEqual(volume.spec.claim_ref.name, "data")
        self.assertEqual(volume.spec.storage_class_name, "standard")
        [default] = classes.items
        self.assertEqual(default.volume_binding_mode, "WaitForFirstConsumer")
