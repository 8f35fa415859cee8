# -*- test-case-name: tests.testing.test_controlplane -*-
"""
The app's control plane made for tests: an in-memory store, a request
recorder, injectable faults and (when asked) a test clock.

L{TestPlane} is L{orchd.app.service.ControlPlane} with three seams filled
differently: the store is a L{MemoryStore} (nothing to open, nothing left
behind), the auditor writes every request at the C{Request} level to a
L{MemorySink}, and the API server's resource handler can be wrapped by a
L{orchd.testing.faults.Faults} queue while one is pending.
"""

import weakref

from orchd.app.service import ControlPlane as AppControlPlane
from orchd.server.audit.memory import MemorySink
from orchd.server.audit.policy import Policy
from orchd.server.filters.audit import Auditor
from orchd.storage.memory import MemoryStore

#: Every request at the C{Request} level: who, what and the request body;
#: response bodies are not kept (they would double the cost of each request).
RECORD_POLICY = {"apiVersion": "audit.orch.io/v1", "kind": "Policy",
                 "rules": [{"level": "Request"}]}


class TestPlane(AppControlPlane):
    """
    The app's control plane on a memory store, recording its requests.

    @ivar sink: the L{MemorySink} of audit events (None with C{audit=False}).
    """

    def __init__(self, config, reactor, audit=True):
        super().__init__(config, reactor)
        self.sink = MemorySink() if audit else None

    def _open_backend(self):
        return MemoryStore()

    def privilegedStartService(self):
        super().privilegedStartService()
        # Kept-alive client connections would outlive stop (a test's clients
        # keep theirs open): remembered here to be closed by drop_connections.
        self.connections = weakref.WeakSet()
        build = self.site.buildProtocol

        def track(addr):
            protocol = build(addr)
            if protocol is not None:
                self.connections.add(protocol)
            return protocol
        self.site.buildProtocol = track
        if self.sink is not None:
            self.auditor = Auditor(Policy.from_document(RECORD_POLICY), [self.sink])
            self.site.resource.auditor = self.auditor

    @property
    def server(self):
        """The L{orchd.server.site.APIServer} resource."""
        return self.site.resource

    def drop_connections(self):
        """Abort every connection still open (called once the listener is closed)."""
        for protocol in list(self.connections):
            transport = getattr(protocol, "transport", None)
            if transport is not None and not getattr(transport, "disconnected", False):
                try:
                    transport.abortConnection()
                except AttributeError:
                    pass        # its TLS layer already shut down: nothing left to abort
