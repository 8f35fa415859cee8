"""Audit lines made from templates: byte for byte the lines of the events' dicts."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.http_headers import Headers
from zope.interface import implementer
from zope.interface.verify import verifyObject

from orchd.auth.authz.always import AlwaysAllow
from orchd.auth.user import UserInfo
from orchd.server.audit.interfaces import IAuditLineSink, IAuditSink
from orchd.server.audit.lines import EventLines, fill
from orchd.server.audit.logbackend import LEGACY, LogBackend
from orchd.server.audit.memory import MemorySink
from orchd.server.audit.policy import Policy
from orchd.server.audit.record import AuditRecord, encode_event
from orchd.server.filters.audit import Auditor
from orchd.server.requestinfo import parse_request_info
from orchd.timing.seconds import utc_seconds
from tests.server.audit.test_record import DenySecrets
from tests.support import ALICE, APIHarness

CM = "/api/v1/namespaces/default/configmaps"
METADATA = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
            "omitStages": ["RequestReceived"], "rules": [{"level": "Metadata"}]}

#: (method, path, body, headers): the templates' shapes and the events that have none.
REQUESTS = [
    ("GET", CM, None, {b"user-agent": [b"kubectl/v1.31"]}),
    ("GET", CM, None, {b"user-agent": [b"kubectl/v1.31"]}),
    ("POST", CM, {"metadata": {"name": "c"}}, {}),
    ("GET", CM + "/c", None, {b"user-agent": [b"k\xc3\xbcbectl \"quoted\" \\ back"]}),
    ("GET", CM + "/c", None, {b"user-agent": [b"k\xc3\xbcbectl \"quoted\" \\ back"]}),
    ("GET", CM + "/missing", None, {}),
    ("GET", CM + "/c", None, {b"x-forwarded-for": [b"10.0.0.1"]}),
    ("GET", CM + "/c", None, {b"x-real-ip": [b"10.0.0.2"]}),
    ("GET", CM + "?limit=1&labelSelector=a%3Db", None, {}),
    ("GET", "/api/v1/namespaces/default/secrets", None, {}),
    ("GET", "/api/v1/namespaces/default/secrets", None, {}),
    ("GET", "/version", None, {}),
    ("GET", "/version", None, {}),
]

#: Audit IDs as clients send them: plain, and what JSON must escape.
IDS = [b"plain-1", b"plain-2", b'quote"d', b"back\\slash", b"ctl\x01x", b"caf\xe9", b"tab\there",
       b"del\x7f", b"\xe2\x80\xa8", b"plain-10", b"plain-11", b"plain-12", b"plain-13"]


@implementer(IAuditSink)
class EncodingSink:
    """Every event as the line of its dict."""

    def __init__(self):
        self.lines = []

    def write(self, event):
        self.lines.append(encode_event(event))


@implementer(IAuditLineSink)
class LineSink(EncodingSink):
    """Takes events as templates and values too, counting them."""

    made = 0

    def write_filled(self, template, audit_id, received, stamp):
        self.made += 1
        self.lines.append(fill(template, audit_id, received, stamp, utc_seconds()))


class LinesTests(SynchronousTestCase):
    def lines(self, sink):
        api = APIHarness(authorizers=[DenySecrets(), AlwaysAllow()])
        api.resource.auditor = Auditor(Policy.from_document(METADATA), [sink], api.clock.seconds)
        for (method, path, body, headers), audit_id in zip(REQUESTS, IDS):
            api.clock.advance(0.1234567)
            api.call(method, path, body, headers={b"audit-id": [audit_id], **headers})
        return sink.lines

    def test_made_lines_are_the_events_lines(self):
        """Lines made from templates are the lines of the events' dicts, byte for byte."""
        made = LineSink()
        self.assertFalse(IAuditLineSink.providedBy(EncodingSink()))
        expected = self.lines(EncodingSink())
        self.assertEqual(len(expected), len(REQUESTS))
        self.assertEqual(self.lines(made), expected)
        # All but the create (its object's name), the 404 and the 403s (their
        # status) and the two through proxies (their addresses).
        self.assertEqual(made.made, 7)

    def test_sinks_that_take_lines(self):
        """Only a lone JSON log takes lines; a legacy log and several sinks take events."""
        clock = Clock()
        log = LogBackend(clock, self.mktemp())
        verifyObject(IAuditLineSink, log)
        self.assertIsNotNone(Auditor(Policy.from_document(METADATA), [log])._lines)
        legacy = LogBackend(clock, self.mktemp(), fmt=LEGACY)
        self.assertFalse(IAuditLineSink.providedBy(legacy))
        self.assertIsNone(Auditor(Policy.from_document(METADATA), [legacy])._lines)
        self.assertIsNone(Auditor(Policy.from_document(METADATA), [log, MemorySink()])._lines)


class Request:
    """What an event reads of a request."""

    method = b"GET"
    uri = b"/api/v1/namespaces/default/configmaps"
    code = 200
    received = 1_700_000_000.25

    def __init__(self, user, audit_id="id"):
        self.api_user = user
        self.audit_id = audit_id
        self.api_info = parse_request_info(self.method, self.uri.decode(), {})
        self.requestHeaders = Headers({b"user-agent": [b"test"]})

    def getClientAddress(self):
        return type("Address", (), {"host": "127.0.0.1"})()


class TemplateTests(SynchronousTestCase):
    def line(self, lines, record, request, code=200, now=1_700_000_001.0):
        """The event's line from its template, or None without one."""
        template = lines.template(record, request, "ResponseComplete", code)
        if template is None:
            return None
        return fill(template, request.audit_id, request.received, now, utc_seconds())

    def record(self):
        policy = Policy.from_document(METADATA)
        record = AuditRecord(policy.always or policy.decide(ALICE, None))
        record.authorized(True, "")
        return record

    def test_one_template_per_shape(self):
        """Events of one shape share a template; a user of the same name is another shape."""
        lines = EventLines()
        record = self.record()
        first = self.line(lines, record, Request(ALICE, "a"))
        second = self.line(lines, record, Request(ALICE, "b"), now=1_700_000_002.0)
        self.assertEqual(len(lines._templates), 1)
        self.assertNotEqual(first, second)
        bob = UserInfo("bob", ("system:authenticated",))
        third = self.line(lines, record, Request(bob, "a"))
        self.assertEqual(len(lines._templates), 2)
        self.assertIn(b'"username":"bob"', third)
        self.assertEqual(third, encode_event(record.event(Request(bob, "a"), "ResponseComplete",
                                                          200, 1_700_000_001.0)))

    def test_bounded(self):
        """Past its size the templates are let go, then made anew."""
        lines = EventLines(size=2)
        record = self.record()
        for code in (200, 201, 202):
            self.line(lines, record, Request(ALICE), code)
        self.assertEqual(len(lines._templates), 1)

    def test_not_of_a_shape(self):
        """Impersonation, an error's status, added annotations: no line, the dict instead."""
        lines = EventLines()
        for change in (lambda r: setattr(r, "impersonated", ALICE),
                       lambda r: setattr(r, "status", {"code": 404}),
                       lambda r: r.annotate("example.orch.io/x", "y")):
            record = self.record()
            change(record)
            self.assertIsNone(self.line(lines, record, Request(ALICE)))
        self.assertEqual(lines._templates, {})
