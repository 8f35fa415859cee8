"""The simulated runtime: pods run at once, with logs, stats and real checkpoint archives."""

import json
import os
import tarfile

from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from zope.interface.verify import verifyObject

from orchd.orchlet.runtime import CheckpointUnsupported, IRuntime, UnknownContainer
from orchd.orchlet.simulated import SimulatedRuntime


def pod(name="web", namespace="default", uid="u1", containers=("app",)):
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"nodeName": "n1", "containers": [
                {"name": c, "image": f"{c}:1.0"} for c in containers]}}


class SimulatedRuntimeTests(TestCase):
    def setUp(self):
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.root = self.mktemp()
        self.runtime = SimulatedRuntime(self.clock, root=self.root)

    def test_provides_interface(self):
        self.assertTrue(verifyObject(IRuntime, self.runtime))

    def test_synced_pod_runs(self):
        """A synced pod is Running with ready containers and an IP."""
        self.runtime.sync_pod(pod(containers=("app", "side")))
        [(spec, status)] = self.runtime.pods()
        self.assertEqual(spec["metadata"]["name"], "web")
        self.assertEqual(status["phase"], "Running")
        self.assertEqual({c["type"]: c["status"] for c in status["conditions"]},
                         {"Initialized": "True", "Ready": "True", "ContainersReady": "True",
                          "PodScheduled": "True"})
        self.assertTrue(status["podIP"].startswith("10.88."))
        app = status["containerStatuses"][0]
        self.assertEqual(app["state"], {"running": {"startedAt": "2023-11-14T22:13:20Z"}})
        self.assertEqual((app["ready"], app["restartCount"], app["image"]), (True, 0, "app:1.0"))
        self.assertTrue(app["containerID"].startswith("simulated://"))
        self.assertTrue(app["imageID"].startswith("app:1.0@sha256:"))

    def test_sync_idempotent_and_kill(self):
        """Syncing again keeps start times and IP; killing forgets the pod."""
        self.runtime.sync_pod(pod())
        before = self.runtime.pods()[0][1]
        self.clock.advance(10)
        self.runtime.sync_pod(pod())
        self.assertEqual(self.runtime.pods()[0][1], before)
        self.runtime.kill_pod("default", "web")
        self.runtime.kill_pod("default", "nothing")
        self.assertEqual(self.runtime.pods(), [])

    def test_distinct_ips(self):
        self.runtime.sync_pod(pod("a", uid="1"))
        self.runtime.sync_pod(pod("b", uid="2"))
        ips = {status["podIP"] for _, status in self.runtime.pods()}
        self.assertEqual(len(ips), 2)

    def test_logs(self):
        """Each container logs a start line, also written under the root directory."""
        self.runtime.sync_pod(pod())
        log = self.runtime.container_logs("default", "web", "app")
        self.assertEqual(log, b"2023-11-14T22:13:20Z container app started from image app:1.0\n")
        path = os.path.join(self.root, "logs", "pods", "default_web_u1", "app", "0.log")
        with open(path, "rb") as stream:
            self.assertEqual(stream.read(), log)
        with self.assertRaises(UnknownContainer) as caught:
            self.runtime.container_logs("default", "web", "nope")
        self.assertEqual(caught.exception.what, "container")
        with self.assertRaises(UnknownContainer) as caught:
            self.runtime.container_logs("default", "nope", "app")
        self.assertEqual(caught.exception.what, "pod")

    def test_stats_from_clock(self):
        """CPU time grows with the clock; memory is per container."""
        self.runtime.sync_pod(pod(containers=("app", "side")))
        self.clock.advance(10)
        stats = self.runtime.stats()
        [entry] = stats["pods"]
        self.assertEqual(entry["podRef"], {"name": "web", "namespace": "default", "uid": "u1"})
        app = entry["containers"][0]
        self.assertEqual(app["cpu"]["usageNanoCores"], 1_000_000)
        self.assertEqual(app["cpu"]["usageCoreNanoSeconds"], 10_000_000)
        self.assertEqual(entry["memory"]["workingSetBytes"], 2 * app["memory"]["workingSetBytes"])
        self.assertEqual(stats["node"]["cpu"]["time"], "2023-11-14T22:13:30Z")
        self.assertGreater(stats["node"]["memory"]["workingSetBytes"],
                           entry["memory"]["workingSetBytes"])

    def test_checkpoint_archive(self):
        """The archive is a real tar holding the container's spec and state."""
        self.runtime.sync_pod(pod())
        path = self.mktemp()
        self.runtime.checkpoint("default", "web", "app", path, 10)
        with tarfile.open(path) as archive:
            spec = json.load(archive.extractfile("spec.json"))
            state = json.load(archive.extractfile("state.json"))
        self.assertEqual(spec, {"name": "app", "image": "app:1.0"})
        self.assertIn("running", state["state"])

    def test_checkpoint_unknown_and_unsupported(self):
        self.runtime.sync_pod(pod())
        with self.assertRaises(UnknownContainer):
            self.runtime.checkpoint("default", "web", "nope", self.mktemp(), 10)
        self.runtime.supports_checkpoint = False
        with self.assertRaises(CheckpointUnsupported):
            self.runtime.checkpoint("default", "web", "app", self.mktemp(), 10)

    def test_recreated_pod_restarts(self):
        """A new uid under the same name is a new pod."""
        self.runtime.sync_pod(pod(uid="1"))
        self.clock.advance(5)
        self.runtime.sync_pod(pod(uid="2"))
        status = self.runtime.pods()[0][1]
        self.assertEqual(status["startTime"], "2023-11-14T22:13:25Z")
