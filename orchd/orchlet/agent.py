# -*- test-case-name: tests.orchlet.test_agent -*-
"""
The node agent's conversation with the API server, as one service.

It registers the Node (creating it, or on 409 bringing the existing one's
labels and status up to date, as after a restart), then runs three loops
on the reactor's clock: the Lease heartbeat, the node status reports and
the pod sync. Registration is retried with the same backoff as the Lease,
so an agent started before its API server is reachable simply waits.
Every request is made with the node's own credentials, so the Node
authorizer and NodeRestriction decide what it may write.
"""

from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, DeferredList
from twisted.logger import Logger

from orchd.orchlet.heartbeat import Backoff, LeaseRenewer
from orchd.orchlet.nodestatus import NodeStatus, node_labels
from orchd.orchlet.podsync import PodSync


class NodeAgent(Service):
    """
    Registration, heartbeat, status and pods of node C{node_name}.

    @param port: C{port() -> int}, the HTTPS endpoint's real port.
    @ivar registered: a Deferred firing with the registered Node.
    """

    log = Logger()

    def __init__(self, clock, api, runtime, node_name, address, root_dir, port, probe=None):
        self.clock = clock
        self.api = api
        self.runtime = runtime
        self.node_name = node_name
        self.node = None
        self.registered = Deferred()
        self.status = NodeStatus(clock, api, node_name, address, runtime.name, root_dir, port,
                                 probe=probe)
        self.lease = LeaseRenewer(clock, api, node_name)
        self.pods = PodSync(clock, api, runtime, node_name)
        self._backoff = Backoff()
        self._pending = None
        self._work = None

    def startService(self):
        super().startService()
        self._work = Deferred.fromCoroutine(self._register())
        self._work.addErrback(lambda f: self.log.failure("Node registration failed", f))

    async def _register(self):
        while self.running:
            try:
                node = await self.register()
            except Exception as e:
                self.log.warn("Registering node {node} failed: {error}", node=self.node_name,
                              error=e)
                node = None
            if node is not None:
                break
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
        self.lease.start()
        self.status.start(self.status.repeater.interval)
        self.pods.start()
        self.registered.callback(node)

    async def register(self):
        """One attempt: the Node, or None on failure."""
        code, body = await self.api.request("POST", "/api/v1/nodes", self.status.node())
        if code == 409:
            code, body = await self.api.request(
                "PATCH", f"/api/v1/nodes/{self.node_name}",
                {"metadata": {"labels": node_labels(self.node_name)}},
                content_type="application/merge-patch+json")
        if code not in (200, 201):
            self.log.warn("Cannot register node {node}: {code} {body}", node=self.node_name,
                          code=code, body=body)
            return None
        # Create may drop the status (a status subresource); report it at once.
        if not await self.status.post():
            return None
        return body

    def stopService(self):
        super().stopService()
        if self._pending is not None:
            self._pending.cancel()
        stopping = [self.lease.stop(), self.status.stop(), self.pods.stop()]
        if self._work is not None:
            stopping.append(self._work)
        return DeferredList(stopping, consumeErrors=True)
