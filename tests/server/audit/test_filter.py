"""The audit step of the server's filter chain and the request log line."""

import os
import uuid

from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from orchd.server import requestlog
from orchd.server.audit.memory import MemorySink
from orchd.server.audit.policy import Policy
from orchd.server.filters.audit import AuditIDs, Auditor
from tests.server.test_watch import Stream
from tests.support import APIHarness

CM = "/api/v1/namespaces/default/configmaps"
TOKEN = b"Bearer abcdef.0123456789abcdef"


class RequestLogTests(SynchronousTestCase):
    def setUp(self):
        self.api = APIHarness()
        self.logged = []
        globalLogPublisher.addObserver(self.logged.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.logged.append)

    def lines(self):
        return [e for e in self.logged if e.get("log_namespace") == "orchd.requests"]

    def test_one_line_per_request(self):
        """Each request logs verb, URI, user, status, latency and audit ID once it is answered."""
        _, _, headers = self.api.call("GET", CM + "/missing?pretty=1",
                                      headers={b"user-agent": [b"kubectl/v1.31"]})
        (event,) = self.lines()
        self.assertEqual((event["verb"], event["uri"], event["user"], event["status"]),
                         ("get", CM + "/missing?pretty=1", "orch-admin", 404))
        self.assertEqual(event["audit_id"], headers.getRawHeaders(b"audit-id")[0].decode())
        self.assertEqual(event["user_agent"], "kubectl/v1.31")
        self.assertGreaterEqual(event["latency_ms"], 0)
        self.assertEqual(formatEvent(event),
                         f"get {CM}/missing?pretty=1 orch-admin 404 0.0ms "
                         f"audit-id={event['audit_id']}")

    def test_event_as_logger_emits_it(self):
        """
        The line's event carries what C{Logger.emit} adds to an event (it
        is sent to the logger's observer directly), its time the request's
        end as the server's clock read it.
        """
        self.api.call("GET", CM)
        (event,) = self.lines()
        self.assertIs(event["log_logger"], requestlog.log)
        self.assertIs(event["log_level"], LogLevel.info)
        self.assertIsNone(event["log_source"])
        self.assertEqual(event["log_format"],
                         "{verb} {uri} {user} {status} {latency_ms:.1f}ms audit-id={audit_id}")
        self.assertEqual(event["log_time"], self.api.clock.seconds())

    def test_watch_logged_when_it_ends(self):
        """A watch's line is written when the watch ends, with its whole duration."""
        stream = Stream(self.api, CM + "?watch=true&timeoutSeconds=5")
        self.assertEqual(self.lines(), [])
        stream.pump(6)
        (event,) = self.lines()
        self.assertEqual((event["verb"], event["status"]), ("watch", 200))
        self.assertGreaterEqual(event["latency_ms"], 5000)

    def test_no_credentials_or_bodies_logged(self):
        """Neither the Authorization header nor a Secret's data appears in any log event."""
        self.api.call("POST", "/api/v1/namespaces/default/secrets",
                      {"metadata": {"name": "s"}, "stringData": {"password": "hunter2-secret"}},
                      headers={b"authorization": [TOKEN]})
        self.api.call("GET", "/api/v1/namespaces/default/secrets/s",
                      headers={b"authorization": [TOKEN]})
        self.assertEqual(len(self.lines()), 2)
        text = repr(self.logged) + "".join(formatEvent(e) for e in self.logged)
        self.assertNotIn("abcdef.0123456789abcdef", text)
        self.assertNotIn("hunter2", text)
        self.assertNotIn("aHVudGVyMi", text)    # base64 of it


class AuditorTests(SynchronousTestCase):
    def test_no_policy_no_records(self):
        """Without a policy no request gets a record, whatever the sinks."""
        auditor = Auditor(None, [MemorySink()])
        self.assertIsNone(auditor.policy)

    def test_no_sink_no_policy(self):
        """A policy without a backend audits nothing."""
        policy = Policy.from_document({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                                       "rules": [{"level": "Metadata"}]})
        self.assertIsNone(Auditor(policy, []).policy)


class AuditIDTests(SynchronousTestCase):
    def test_version_4_uuids_of_the_random_bytes(self):
        """Each ID is the version-4 UUID that uuid.UUID makes of the next 16 random bytes."""
        data = os.urandom(16 * 3)
        reads = []

        def urandom(n):
            reads.append(n)
            return data[:n]

        ids = AuditIDs(urandom)
        ids.batch = 2
        made = [ids() for _ in range(3)]
        self.assertEqual(reads, [32, 32])
        self.assertEqual(made, [str(uuid.UUID(bytes=data[0:16], version=4)),
                                str(uuid.UUID(bytes=data[16:32], version=4)),
                                str(uuid.UUID(bytes=data[0:16], version=4))])

    def test_version_and_variant_bits(self):
        """All-ones and all-zeros bytes give the UUIDs uuid4 would: only those bits set."""
        for byte, expected in ((b"\xff", "ffffffff-ffff-4fff-bfff-ffffffffffff"),
                               (b"\x00", "00000000-0000-4000-8000-000000000000")):
            self.assertEqual(AuditIDs(lambda n: byte * n)(), expected)

    def test_unique(self):
        """IDs from the system's random bytes do not repeat, across batches."""
        ids = AuditIDs()
        made = {ids() for _ in range(3 * AuditIDs.batch)}
        self.assertEqual(len(made), 3 * AuditIDs.batch)
        self.assertEqual({uuid.UUID(i).version for i in made}, {4})
