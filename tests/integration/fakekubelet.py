"""
A stand-in for the scheduler and a node agent, for integration tests of the
workload controllers: it binds pending pods to one fake Node and reports them
Running and Ready, all through the API, and removes pods being deleted.

It polls (a list of pods every C{interval} seconds) instead of watching: the
tests it serves wait for rollouts of a few pods, and polling keeps it small.
Once the scheduler and the simulated nodes run in the server, tests use them
instead (C{--simulated-nodes}); see the workload tests' module docstring.
"""

import time

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

PODS = "/api/v1/pods"
MERGE = {b"content-type": [b"application/merge-patch+json"]}


def _stamp():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class FakeKubelet:
    """
    @param server: a L{tests.integration.support.RunningControlPlane}.
    @param node: the name of the Node pods are bound to.
    """

    log = Logger()

    def __init__(self, server, node="fake-node", interval=0.2):
        self._server = server
        self._node = node
        self._loop = LoopingCall(lambda: Deferred.fromCoroutine(self._tick()))
        self._loop.clock = reactor
        self._interval = interval
        self.bound = 0

    async def start(self):
        code, body = await self._server.call("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": self._node},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "lastHeartbeatTime": _stamp(),
                                       "lastTransitionTime": _stamp()}],
                       "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                       "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000"}}})
        if code not in (201, 409):
            raise AssertionError(f"creating the fake node: {code} {body}")
        self._loop.start(self._interval).addErrback(
            lambda f: self.log.failure("Fake kubelet stopped", f))
        return self

    def stop(self):
        if self._loop.running:
            self._loop.stop()

    async def _tick(self):
        code, listing = await self._server.call("GET", PODS)
        if code != 200:
            return
        for pod in listing["items"]:
            meta = pod["metadata"]
            where = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            node = (pod.get("spec") or {}).get("nodeName")
            if meta.get("deletionTimestamp"):
                if node == self._node:
                    await self._server.call("DELETE", f"{where}?gracePeriodSeconds=0")
                continue
            if not node:
                code, _ = await self._server.call(
                    "PATCH", where, {"spec": {"nodeName": self._node}}, MERGE)
                if code != 200:
                    continue
                self.bound += 1
            elif node != self._node:
                continue
            conditions = (pod.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                continue
            now = _stamp()
            await self._server.call("PATCH", f"{where}/status", {"status": {
                "phase": "Running", "podIP": "10.88.0.10", "podIPs": [{"ip": "10.88.0.10"}],
                "conditions": [{"type": cond, "status": "True", "lastTransitionTime": now}
                               for cond in ("PodScheduled", "Initialized", "ContainersReady",
                                            "Ready")]}}, MERGE)
