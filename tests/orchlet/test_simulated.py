"""The simulated runtime: pods as records, with logs, stats and real checkpoint archives."""

import json
import os
import tarfile

from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from orchd.orchlet.behaviour import START_AFTER
from orchd.orchlet.runtime import (
    CheckpointUnsupported, IRuntime, IRuntimeObserver, UnknownContainer,
)
from orchd.orchlet.simulated import SimulatedRuntime


def pod(name="web", namespace="default", uid="u1", containers=("app",), start_after="0s",
        annotations=None, **spec):
    """A pod bound to n1; by default its containers start as soon as it arrives."""
    meta = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1"}
    notes = dict(annotations or {})
    if start_after is not None:
        notes[START_AFTER] = start_after
    if notes:
        meta["annotations"] = notes
    return {"metadata": meta,
            "spec": dict({"nodeName": "n1", "containers": [
                {"name": c, "image": f"{c}:1.0"} for c in containers]}, **spec)}


@implementer(IRuntimeObserver)
class Observer:
    """Records what a runtime tells its node agent."""

    def __init__(self):
        self.changes = []
        self.events = []

    def pod_changed(self, namespace, name):
        self.changes.append((namespace, name))

    def pod_event(self, pod, type, reason, message, field_path):
        self.events.append((pod["metadata"]["name"], type, reason, message, field_path))

    def reasons(self):
        return [reason for _, _, reason, _, _ in self.events]


class SimulatedRuntimeTests(TestCase):
    def setUp(self):
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.root = self.mktemp()
        self.runtime = SimulatedRuntime(self.clock, root=self.root, host_ip="192.0.2.7")
        self.observer = Observer()
        self.runtime.observe(self.observer)

    def test_provides_interface(self):
        """The runtime and the test observer provide their interfaces."""
        self.assertTrue(verifyObject(IRuntime, self.runtime))
        self.assertTrue(verifyObject(IRuntimeObserver, self.observer))

    def test_synced_pod_runs(self):
        """A pod that may start at once is Running with ready containers, IPs and IDs."""
        self.runtime.sync_pod(pod(containers=("app", "side")))
        [(spec, status)] = self.runtime.pods()
        self.assertEqual(spec["metadata"]["name"], "web")
        self.assertEqual(status["phase"], "Running")
        self.assertEqual({c["type"]: c["status"] for c in status["conditions"]},
                         {"PodReadyToStartContainers": "True", "Initialized": "True",
                          "Ready": "True", "ContainersReady": "True", "PodScheduled": "True"})
        self.assertTrue(status["podIP"].startswith("10.88."))
        self.assertEqual(status["podIPs"], [{"ip": status["podIP"]}])
        self.assertEqual((status["hostIP"], status["hostIPs"]),
                         ("192.0.2.7", [{"ip": "192.0.2.7"}]))
        self.assertEqual(status["startTime"], "2023-11-14T22:13:20Z")
        app = status["containerStatuses"][0]
        self.assertEqual(app["state"], {"running": {"startedAt": "2023-11-14T22:13:20Z"}})
        self.assertEqual((app["name"], app["ready"], app["started"], app["restartCount"],
                          app["image"], app["lastState"]), ("app", True, True, 0, "app:1.0", {}))
        self.assertTrue(app["containerID"].startswith("simulated://"))
        self.assertTrue(app["imageID"].startswith("app:1.0@sha256:"))
        self.assertEqual(self.runtime.pod_status("default", "web"), status)
        self.assertIsNone(self.runtime.pod_status("default", "nothing"))

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
        self.assertEqual(self.observer.reasons()[-1], "Killing")

    def test_distinct_ips(self):
        """Each pod gets an address of its own, given back when it is killed."""
        self.runtime.sync_pod(pod("a", uid="1"))
        self.runtime.sync_pod(pod("b", uid="2"))
        ips = {status["podIP"] for _, status in self.runtime.pods()}
        self.assertEqual(len(ips), 2)

    def test_pod_network_per_runtime(self):
        """A runtime given a network takes pod IPs from it, skipping .0, .1 and .255."""
        import ipaddress
        runtime = SimulatedRuntime(self.clock, network=ipaddress.ip_network("10.89.3.0/24"))
        for index in range(3):
            runtime.sync_pod(pod(str(index), uid=str(index)))
        self.assertEqual(sorted(s["podIP"] for _, s in runtime.pods()),
                         ["10.89.3.2", "10.89.3.3", "10.89.3.4"])

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
        """CPU time grows with the clock; memory is per running container."""
        self.runtime.sync_pod(pod(containers=("app", "side")))
        self.clock.advance(10)
        stats = self.runtime.stats()
        [entry] = stats["pods"]
        self.assertEqual(entry["podRef"], {"name": "web", "namespace": "default", "uid": "u1"})
        app = entry["containers"][0]
        self.assertEqual(app["cpu"]["usageNanoCores"], 1_000_000)
        self.assertEqual(app["cpu"]["usageCoreNanoSeconds"], 10_000_000)
        self.assertEqual(entry["cpu"]["usageCoreNanoSeconds"], 20_000_000)
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
        """An unknown container is UnknownContainer; a runtime without checkpoints says so."""
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

    def test_changes_are_told(self):
        """The observer hears of each status change the clock brings, and of nothing else."""
        self.runtime.sync_pod(pod(start_after="2s"))
        self.assertEqual(self.observer.changes, [("default", "web")])
        self.clock.advance(1)
        self.assertEqual(len(self.observer.changes), 1)
        self.clock.advance(1)
        self.assertEqual(len(self.observer.changes), 2)
        self.assertEqual(self.runtime.pod_status("default", "web")["phase"], "Running")

    def test_images_are_kept_per_node(self):
        """An image pulled once is already present for the next pod that may reuse it."""
        self.runtime.sync_pod(pod("a", uid="1", start_after=None))
        self.clock.advance(1)
        self.runtime.sync_pod(pod("b", uid="2", start_after=None))
        self.assertEqual(self.runtime.pod_status("default", "b")["phase"], "Running")
        pulled = [message for name, _, reason, message, _ in self.observer.events
                  if name == "b" and reason == "Pulled"]
        self.assertEqual(pulled, ['Container image "app:1.0" already present on machine'])

    def test_stop_fires_once_stopped(self):
        """stop_pod's Deferred fires when every container has stopped; unknown pods at once."""
        self.runtime.sync_pod(pod(annotations={"orchlet.orch.io/stop-after": "3s"}))
        stopped = self.runtime.stop_pod("default", "web", 30)
        self.assertNoResult(stopped)
        self.clock.advance(3)
        self.successResultOf(stopped)
        self.assertEqual(self.runtime.pod_status("default", "web")["phase"], "Succeeded")
        self.successResultOf(self.runtime.stop_pod("default", "nothing", 30))

    def test_close_cancels_timers(self):
        """Closing the runtime leaves no timer behind; its pods keep their last state."""
        self.runtime.sync_pod(pod(start_after="5s"))
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.runtime.close()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.assertEqual(self.runtime.pod_status("default", "web")["phase"], "Pending")

    def test_stored_ip_kept_when_free(self):
        """A pod synced with a stored podIP keeps it if free and in range; else it gets another."""
        kept = pod("a", uid="1")
        kept["status"] = {"podIP": "10.88.0.40"}
        clash = pod("b", uid="2")
        clash["status"] = {"podIP": "10.88.0.40"}
        outside = pod("c", uid="3")
        outside["status"] = {"podIP": "192.0.2.1"}
        for body in (kept, clash, outside):
            self.runtime.sync_pod(body)
        ips = {name: self.runtime.pod_status("default", name)["podIP"] for name in "abc"}
        self.assertEqual(ips["a"], "10.88.0.40")
        self.assertNotIn(ips["b"], ("10.88.0.40",))
        self.assertTrue(ips["c"].startswith("10.88."))
        self.assertEqual(len(set(ips.values())), 3)
