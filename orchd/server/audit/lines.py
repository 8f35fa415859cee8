# -*- test-case-name: tests.server.audit.test_lines -*-
"""
An audit event's JSON line, made from the line of an earlier one alike.

Most events of a busy server repeat one another but for their audit ID and
two timestamps: the same user asks for the same URI from the same address,
is allowed by the same rule and answered with the same code. For a sink
that takes JSON lines (the log file), L{EventLines} keeps the line of each
such shape as a template, cut at those three values, and the next event of
the shape is that template and the three values: building the event's dict
and encoding it, the rest of the work, is done once per shape. The sink
fills them in (L{fill}) where it writes, off the reactor: all it is handed
already lives on, as the template's text, and the values (two numbers and
the request's text of its audit ID) are made the line's text in a batch.

A template is made by encoding the event the usual way
(L{orchd.server.audit.record.AuditRecord.event_of}) with placeholders for
the three values, so a line made from it is byte for byte the line of the
event's dict (the tests check). The placeholders hold a random nonce of the
process: no text a client sends can pass for one. Only events whose every
other field follows from the template's key have one; the rest (bodies, an
error's status, an impersonated user, a proxy's forwarded addresses, an
object's name from a body, admission's annotations) are made as dicts.
"""

import os

import orjson

from orchd.server.audit.record import encode_event, header_fields
from orchd.timing.seconds import micro_times

#: Templates kept; past this many, they are all let go and made anew.
TEMPLATES = 4096


class EventLines:
    """The JSON lines of plain audit events (see the module), from templates."""

    def __init__(self, size=TEMPLATES, nonce=None):
        self._size = size
        nonce = nonce or os.urandom(12).hex()
        #: The audit ID's and the two timestamps' stand-ins, and where they
        #: appear in an encoded line (their JSON strings, quoted).
        self._placeholders = tuple(f"\x00{nonce}{n}" for n in "irs")
        self._cuts = tuple(orjson.dumps(p).decode() for p in self._placeholders)
        #: {shape: (the user's dict, head, after the ID, between the times, tail)}
        self._templates = {}

    def template(self, record, request, stage, code):
        """
        The template of the event's shape, for L{fill}, or None if the event
        is not one of a shape (see the module).
        """
        if (record.status is not None or record.decision.bodies or record.impersonated is not None
                or record.object_meta is not None or record.annotations is not None):
            return None
        headers = header_fields(request)
        if b"X-Forwarded-For" in headers or b"X-Real-Ip" in headers:
            return None
        agent = headers.get(b"User-Agent")
        user = request.api_user
        shared = user.shared_dict() if user is not None else None
        # The user's dict is kept by the template, so its id names no other
        # while the template is kept. The method and the URI give the
        # request's info.
        key = (record.decision, stage, code, request.method, request.uri,
               agent[-1] if agent else None, getattr(request.getClientAddress(), "host", None),
               id(shared), record.answer)
        template = self._templates.get(key)
        if template is None:
            template = self._make(record, request, stage, code, shared)
            if template is None:
                return None
            if len(self._templates) >= self._size:
                self._templates.clear()
            self._templates[key] = template
        return template

    def _make(self, record, request, stage, code, kept):
        """The event's line cut at the placeholders; None if they are not each found once."""
        ids, received, stamp = self._placeholders
        line = encode_event(record.event_of(request, stage, code, ids, received, stamp)).decode()
        parts = []
        for cut in self._cuts:
            if line.count(cut) != 1:
                return None
            head, _, line = line.partition(cut)
            parts.append(head)
        # The values' quotes stay in the template.
        return (kept, parts[0] + '"', '"' + parts[1] + '"', '"' + parts[2] + '"', '"' + line)


def fill(template, audit_id, received, stamp, utc_second):
    """
    The line (bytes, newline included) of an event of C{template}'s shape
    with its audit ID and its two timestamps (seconds since the epoch),
    formatted with C{utc_second} (the calling thread's
    L{orchd.timing.seconds.utc_seconds}): byte for byte the line of the
    event's dict.
    """
    _, head, middle, between, tail = template
    if not audit_id.isprintable() or '"' in audit_id or "\\" in audit_id:
        # A client's audit ID may hold what JSON escapes; printable
        # text without quotes or backslashes it writes as it is.
        audit_id = orjson.dumps(audit_id).decode()[1:-1]
    received, stamp = micro_times(received, stamp, utc_second)
    return f"{head}{audit_id}{middle}{received}{between}{stamp}{tail}".encode()
