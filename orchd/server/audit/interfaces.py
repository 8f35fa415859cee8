# -*- test-case-name: tests.server.audit.test_logbackend -*-
"""Where audit events go: the log file, the webhook, or an in-process recorder."""

from zope.interface import Interface


class IAuditSink(Interface):
    """
    A receiver of audit events, called on the reactor thread once per event.

    An event is a dict in upstream's C{audit.k8s.io/v1} C{Event} shape whose
    C{requestObject} and C{responseObject}, when present, are
    L{orchd.server.audit.record.Body} values (call C{decode()} for the
    object); L{orchd.server.audit.record.encode_event} writes the JSON line.
    A sink may keep the event but never changes it or what it holds:
    parts of it (the user, a success's status) are shared between events.
    """

    def write(event):
        """Take one event. Must not block and must not raise."""


class IAuditLineSink(IAuditSink):
    """
    A sink that writes each event as its JSON line
    (L{orchd.server.audit.record.encode_event}): it also takes events as a
    template of their shape and the values to fill in
    (L{orchd.server.audit.lines}).
    """

    def write_filled(template, audit_id, received, stamp):
        """
        Take one event: its line is L{orchd.server.audit.lines.fill} of
        these. Must not block nor raise.
        """
