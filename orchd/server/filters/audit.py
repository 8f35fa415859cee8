# -*- test-case-name: tests.server.audit.test_filter -*-
"""
The audit step of a request, as upstream's C{WithAuditInit},
C{WithAudit} and C{WithFailedAuthenticationAudit} filters.

Every request gets an audit ID (the client's C{Audit-ID} header if it sent
one, else a new random UUID, as upstream's), returned as the C{Audit-ID}
response header whether auditing is on or not. Once the user is known the policy decides the
request's level; only an audited request gets an L{AuditRecord}, so
auditing off, or a request the policy leaves out, costs one policy walk.
"""

import os
import time

from orchd.server.audit.interfaces import IAuditLineSink
from orchd.server.audit.lines import EventLines
from orchd.server.audit.policy import COMPLETE, NONE, PANIC, RECEIVED, STARTED, Policy
from orchd.server.audit.record import AuditRecord

_HEADER = b"Audit-ID"
#: The hex digit of a UUID's variant nibble (10xx) for each random one.
_VARIANT = {f"{n:x}": f"{(n & 3) | 8:x}" for n in range(16)}


class AuditIDs:
    """
    New audit IDs: random (version 4) UUIDs in their text form.

    C{str(uuid.uuid4())} is a system call and a C{UUID} object per request;
    here the random bytes are read 4 KB at a time and each ID is their hex
    with the version and variant digits set, as C{uuid4} sets those bits.
    Only the reactor thread calls it.
    """

    #: IDs per read of the system's random bytes.
    batch = 256

    def __init__(self, urandom=os.urandom):
        self._urandom = urandom
        self._pool = ""
        self._at = 0

    def __call__(self):
        at = self._at
        if at >= len(self._pool):
            self._pool = self._urandom(16 * self.batch).hex()
            at = 0
        self._at = at + 32
        h = self._pool[at:at + 32]
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


class Auditor:
    """
    @param policy: the L{Policy}; None audits nothing.
    @param sinks: the L{orchd.server.audit.interfaces.IAuditSink}s events go to.
    @param now: the wall clock (seconds since the epoch).
    """

    def __init__(self, policy=None, sinks=(), now=time.time):
        self.policy = policy if sinks else None
        self.sinks = tuple(sinks)
        self.now = now
        self._new_id = AuditIDs()
        if len(self.sinks) == 1:
            self._emit = self.sinks[0].write
        else:
            self._emit = self._emit_all
        #: With one sink that writes lines, events of a shape seen before
        #: are given to it as their templates and values (L{EventLines}).
        self._lines = self._write_filled = None
        if len(self.sinks) == 1 and IAuditLineSink.providedBy(self.sinks[0]):
            self._lines = EventLines()
            self._write_filled = self.sinks[0].write_filled

    def _emit_all(self, event):
        for sink in self.sinks:
            sink.write(event)

    def begin(self, request):
        """Give the request its audit ID and the C{Audit-ID} header; note when it came."""
        request.received = self.now()
        request.audit = request.api_info = request.api_user = None
        given = request.requestHeaders.getRawHeaders(_HEADER)
        if given and given[0]:
            raw = given[0]
            request.audit_id = raw.decode("latin-1")
        else:
            request.audit_id = audit_id = self._new_id()
            raw = audit_id.encode("ascii")
        request.setHeader(_HEADER, raw)

    def _record(self, request, info, user):
        decision = self.policy.always or self.policy.decide(user, info)
        if decision.level == NONE:
            return None
        record = request.audit = AuditRecord(decision)
        if decision.bodies and info.is_resource_request:
            record.keep_bodies(request, info)
        return record

    def _stage(self, request, record, stage, code=None):
        """
        Emit the event of C{stage} unless the policy leaves it out: as its
        template and values when the sink takes lines and the event is of a
        shape (L{EventLines}), as most are.
        """
        if stage in record.decision.omit_stages:
            return
        now = self.now()
        if self._lines is not None:
            template = self._lines.template(record, request, stage, code)
            if template is not None:
                self._write_filled(template, request.audit_id, request.received, now)
                return
        self._emit(record.event(request, stage, code, now))

    def authenticated(self, request, info, user):
        """Decide the level for the authenticated user; emit C{RequestReceived}."""
        if self.policy is None:
            return
        record = self._record(request, info, user)
        # Most policies omit this stage: no call to learn it.
        if record is not None and RECEIVED not in record.decision.omit_stages:
            self._stage(request, record, RECEIVED)

    def authentication_failed(self, request, info, status):
        """A 401: one C{ResponseStarted} event with the status, and no other, as upstream."""
        if self.policy is None:
            return
        record = self._record(request, info, None)
        if record is not None:
            record.status = status
            record.finished = True
            self._stage(request, record, STARTED, status["code"])

    def impersonated(self, request, user):
        record = request.audit
        if record is not None:
            record.impersonated = user

    def long_running(self, request):
        """A watch or stream is about to answer: C{ResponseStarted}."""
        record = request.audit
        if record is not None:
            self._stage(request, record, STARTED, request.code)

    def finished(self, request, panicked=False):
        """The answer is complete: C{ResponseComplete}, or C{Panic} after a bug."""
        record = request.audit
        if record is not None and not record.finished:
            record.finished = True
            self._stage(request, record, PANIC if panicked else COMPLETE, request.code)


def load_policy(path):
    """The policy of C{--audit-policy-file} (L{Policy.load}); None without one."""
    return None if path is None else Policy.load(path)
