# -*- test-case-name: tests.server.audit.test_filter -*-
"""An audit sink that keeps events in memory: a request recorder for tests."""

from zope.interface import implementer

from orchd.server.audit.interfaces import IAuditSink


@implementer(IAuditSink)
class MemorySink:
    """
    Keeps every event it is given, in order, in C{events}.

    A test fixture hands one to the API server's L{Auditor} to see which
    requests were made, by whom, and with what answer.
    """

    def __init__(self):
        self.events = []

    def write(self, event):
        self.events.append(event)

    def stages(self, stage="ResponseComplete"):
        """The events of one stage."""
        return [event for event in self.events if event["stage"] == stage]
