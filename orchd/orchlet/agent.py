# -*- test-case-name: tests.orchlet.test_agent -*-
"""
The node agent's conversation with the API server, as one service.

It registers the Node (creating it, or on 409 bringing the existing one's
labels and status up to date, as after a restart), then runs two loops on
the reactor's clock, the Lease heartbeat and the node status reports, and
follows the pods bound to it (L{PodWatch}, unless the pods of several
nodes share one watch) to run them (L{PodWorker}). Registration is retried
with the same backoff as the Lease, so an agent started before its API
server is reachable simply waits. Every request is made with the node's
own credentials, so the Node authorizer and NodeRestriction decide what it
may write; events too (L{APIEventRecorder}).
"""

from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, DeferredList
from twisted.logger import Logger

from orchd.orchlet.events import APIEventRecorder
from orchd.orchlet.heartbeat import Backoff, LeaseRenewer
from orchd.orchlet.nodestatus import NodeStatus
from orchd.orchlet.podwatch import PodWatch
from orchd.orchlet.podworker import PodWorker


class NodeAgent(Service):
    """
    Registration, heartbeat, status and pods of node C{node_name}.

    @param port: C{port() -> int}, the HTTPS endpoint's real port.
    @param capacity: the node's capacity (quantities by resource), or None
        for the machine's (L{orchd.orchlet.nodestatus}).
    @param labels: labels the Node gets besides the usual ones.
    @param watch_pods: False when the caller feeds C{pods} from a watch it shares.
    @param stagger: seconds before the first Lease renewal after registration,
        to spread the heartbeats of many nodes, or C{stagger() -> seconds}
        asked at registration (a slot in a common cycle).
    @param registration_gate: a C{DeferredSemaphore} bounding the
        registrations of many nodes under way at once, or None.
    @param report_phase: where the periodic status reports come in their
        common cycle (L{orchd.orchlet.nodestatus.NodeStatus}), or None.
    @ivar registered: a Deferred firing with the registered Node.
    @ivar pods: the L{PodWorker} of this node's pods.
    """

    log = Logger()

    def __init__(self, clock, api, runtime, node_name, address, root_dir, port, probe=None,
                 capacity=None, labels=None, watch_pods=True, stagger=0,
                 registration_gate=None, report_phase=None):
        self.clock = clock
        self.api = api
        self.runtime = runtime
        self.node_name = node_name
        self.node = None
        self.registered = Deferred()
        self.status = NodeStatus(clock, api, node_name, address, runtime.name, root_dir, port,
                                 probe=probe, capacity=capacity, labels=labels,
                                 report_phase=report_phase)
        self.lease = LeaseRenewer(clock, api, node_name)
        self.events = APIEventRecorder(clock, api, node_name)
        self.pods = PodWorker(clock, api, runtime, node_name, self.events)
        self.watch = None
        if watch_pods:
            self.watch = PodWatch(clock, api, f"spec.nodeName={node_name}",
                                  {node_name: self.pods})
        self._stagger = stagger
        self._gate = registration_gate
        self._backoff = Backoff()
        self._pending = None
        self._attempt = None
        self._work = None

    def startService(self):
        super().startService()
        self._work = Deferred.fromCoroutine(self._register())
        self._work.addErrback(lambda f: self.log.failure("Node registration failed", f))

    async def _register(self):
        while self.running:
            if self._gate is None:
                self._attempt = Deferred.fromCoroutine(self.register())
            else:
                self._attempt = self._gate.run(lambda: Deferred.fromCoroutine(self.register()))
            try:
                node = await self._attempt
            except CancelledError:
                return              # stopped, maybe while waiting for the gate
            except Exception as e:
                self.log.warn("Registering node {node} failed: {error}", node=self.node_name,
                              error=e)
                node = None
            finally:
                self._attempt = None
            if node is not None:
                break
            if not self.running:
                return
            self._pending = Deferred()
            call = self.clock.callLater(self._backoff.next(), self._pending.callback, None)
            self._pending.addErrback(lambda f: call.cancel() if call.active() else None)
            try:
                await self._pending
            except CancelledError:
                return
            finally:
                self._pending = None
        else:
            return
        self.node = node
        self.log.info("Registered node {node}", node=self.node_name)
        self.lease.owner = node
        self.lease.start(self._stagger() if callable(self._stagger) else self._stagger)
        self.status.start(self.status.repeater.interval if self.status.reported is not None
                          else 0)
        if self.watch is not None:
            self.watch.start()
        self.registered.callback(node)

    async def register(self):
        """One attempt: the Node, or None on failure."""
        code, body = await self.api.request("POST", "/api/v1/nodes", self.status.node())
        if code == 409:
            code, body = await self.api.request(
                "PATCH", f"/api/v1/nodes/{self.node_name}",
                {"metadata": {"labels": self.status.labels()}},
                content_type="application/merge-patch+json")
        if code not in (200, 201):
            self.log.warn("Cannot register node {node}: {code} {body}", node=self.node_name,
                          code=code, body=body)
            return None
        # Create may drop the status (a status subresource); report it at once.
        # A refusal (the server busy: 429) leaves the retries to the status
        # loop, started at once, as upstream's kubelet reports status apart
        # from registering: the Node exists, and going back to the end of
        # thousands of registrations waiting for the gate would leave it
        # without status or Lease past the grace period, marked Unknown.
        await self.status.post()
        return body

    def stopService(self):
        super().stopService()
        # Thousands of nodes may wait for the registration gate: none of
        # them is to register once stopping.
        if self._attempt is not None:
            self._attempt.cancel()
        if self._pending is not None:
            self._pending.cancel()
        stopping = [self.lease.stop(), self.status.stop(), self.pods.stop(), self.events.stop()]
        if self.watch is not None:
            stopping.append(self.watch.stop())
        if self._work is not None:
            stopping.append(self._work)
        return DeferredList(stopping, consumeErrors=True)
