"""The audit log file: rotation as lumberjack does it, the writer thread, the legacy format."""

import gzip
import os
import threading

import orjson
from twisted.internet import reactor
from twisted.internet.task import Clock, deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase
from zope.interface.verify import verifyObject

from orchd.server.audit import logbackend
from orchd.server.audit.interfaces import IAuditLineSink, IAuditSink
from orchd.server.audit.logbackend import LogBackend, RotatingFile, legacy_line
from orchd.server.audit.record import Body

MB = 1024 * 1024
#: 2021-04-09T07:50:08Z
T0 = 1617954608.25


def event(n=0, **fields):
    return {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
            "auditID": f"id-{n}", "stage": "ResponseComplete", "requestURI": "/api/v1/pods",
            "verb": "list", "user": {"username": "alice", "groups": ["devs", "x"]},
            "sourceIPs": ["10.0.0.1"], "userAgent": "kubectl",
            "objectRef": {"resource": "pods", "namespace": "a", "apiVersion": "v1"},
            "responseStatus": {"metadata": {}, "code": 200},
            "requestReceivedTimestamp": "2021-04-09T07:50:08.137100Z",
            "stageTimestamp": "2021-04-09T07:50:08.140000Z", **fields}


class RotationTests(SynchronousTestCase):
    def setUp(self):
        self.dir = self.mktemp()
        os.makedirs(self.dir)
        self.clock = Clock()
        self.clock.advance(T0)
        self.path = os.path.join(self.dir, "audit.log")

    def open(self, **kwargs):
        out = RotatingFile(self.path, now=self.clock.seconds, **kwargs)
        self.addCleanup(out.close)
        return out

    def test_rotates_past_max_size_with_timestamp(self):
        """A write that would pass the size renames the file <name>-<UTC stamp>.log first."""
        out = self.open(max_size_mb=1)
        out.write(b"a" * (MB - 10))
        out.write(b"b" * 10)
        out.flush()
        self.assertEqual(sorted(os.listdir(self.dir)), ["audit.log"])
        out.write(b"c")
        out.flush()
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["audit-2021-04-09T07-50-08.250.log", "audit.log"])
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), b"c")
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o600)

    def test_max_backups(self):
        """Only the newest maxbackup backups are kept."""
        out = self.open(max_size_mb=1, max_backups=2)
        for _ in range(4):
            out.write(b"x" * MB)
            self.clock.advance(1)
        names = sorted(os.listdir(self.dir))
        self.assertEqual(names, ["audit-2021-04-09T07-50-10.250.log",
                                 "audit-2021-04-09T07-50-11.250.log", "audit.log"])

    def test_max_age(self):
        """Backups whose name says they are older than maxage days are removed."""
        out = self.open(max_size_mb=1, max_age_days=1)
        out.write(b"x" * MB)
        out.write(b"x" * MB)      # backup at T0
        self.clock.advance(86400 + 5)
        out.write(b"x" * MB)      # backup at T0 + 1 day + 5 s; the first is too old now
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["audit-2021-04-10T07-50-13.250.log", "audit.log"])

    def test_compress(self):
        """With compress the backup is gzipped and the plain one removed."""
        out = self.open(max_size_mb=1, compress=True)
        out.write(b"y" * MB)
        out.write(b"z")
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["audit-2021-04-09T07-50-08.250.log.gz", "audit.log"])
        with gzip.open(os.path.join(self.dir, "audit-2021-04-09T07-50-08.250.log.gz")) as f:
            self.assertEqual(f.read(), b"y" * MB)

    def test_no_rotation_by_default(self):
        """Without a max size the file only grows; other files in the directory are left alone."""
        with open(os.path.join(self.dir, "audit-notes.log"), "w") as f:
            f.write("mine")
        out = self.open(max_backups=1)
        for _ in range(3):
            out.write(b"x" * MB)
        self.assertEqual(sorted(os.listdir(self.dir)), ["audit-notes.log", "audit.log"])

    def test_appends_to_existing_file(self):
        """A restart appends and counts what the file already holds toward the size."""
        with open(self.path, "wb") as f:
            f.write(b"x" * (MB - 1))
        out = self.open(max_size_mb=1)
        out.write(b"yy")
        self.assertEqual(len(os.listdir(self.dir)), 2)


class LegacyTests(SynchronousTestCase):
    def test_legacy_line(self):
        """The legacy format is upstream's EventString."""
        self.assertEqual(
            legacy_line(event()),
            b'2021-04-09T07:50:08.1371Z AUDIT: id="id-0" stage="ResponseComplete" '
            b'ip="10.0.0.1" method="list" user="alice" groups="\\"devs\\",\\"x\\"" '
            b'as="<self>" asgroups="<lookup>" user-agent="kubectl" namespace="a" '
            b'uri="/api/v1/pods" response="200"\n')

    def test_legacy_defaults(self):
        """Missing user, status and namespace are written as upstream's placeholders."""
        line = legacy_line(event(user={}, responseStatus=None, objectRef=None,
                                 impersonatedUser={"username": "bob"}))
        self.assertIn(b'user="<none>" groups="<none>" as="bob" asgroups="<lookup>"', line)
        self.assertIn(b'namespace="<none>"', line)
        self.assertIn(b'response="<deferred>"', line)


class BackendTests(TestCase):
    def backend(self, **kwargs):
        path = os.path.join(os.path.abspath(self.mktemp()), "audit.log")
        backend = LogBackend(reactor, path, **kwargs)
        return backend, path

    async def test_every_event_written_on_stop(self):
        """Events queued before a clean stop are all in the file when the stop fires."""
        backend, path = self.backend()
        verifyObject(IAuditSink, backend)
        backend.startService()
        for n in range(2000):
            backend.write(event(n, requestObject=Body(b'{"a": 1}', b"application/json")))
        await backend.stopService()
        with open(path, "rb") as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 2000)
        self.assertEqual([orjson.loads(line)["auditID"] for line in lines],
                         [f"id-{n}" for n in range(2000)])
        self.assertEqual(orjson.loads(lines[0])["requestObject"], {"a": 1})
        self.assertEqual(backend.dropped, 0)

    async def test_order_kept_across_hand_overs(self):
        """Lines and events with bodies (encoded by the writer) reach the file in order."""
        backend, path = self.backend()
        backend.startService()
        for n in range(200):
            if n % 7 == 3:
                backend.write(event(n, requestObject=Body(b'{"n": %d}' % n, b"application/json")))
            else:
                backend.write(event(n))
        await backend.stopService()
        with open(path, "rb") as f:
            lines = [orjson.loads(line) for line in f]
        self.assertEqual([line["auditID"] for line in lines], [f"id-{n}" for n in range(200)])
        self.assertEqual(lines[3]["requestObject"], {"n": 3})

    async def test_written_while_running(self):
        """What gathers is handed to the writer within the flush interval, not only at the stop."""
        self.patch(logbackend, "FLUSH_INTERVAL", 0.01)
        backend, path = self.backend()
        backend.startService()
        self.addCleanup(backend.stopService)
        backend.write(event(1))
        for _ in range(1000):       # up to ten seconds on a busy machine
            await deferLater(reactor, 0.01)
            with open(path, "rb") as f:
                if f.read():
                    break
        with open(path, "rb") as f:
            self.assertEqual(orjson.loads(f.read())["auditID"], "id-1")

    async def test_batch_handed_over_early(self):
        """Half the buffer gathered is handed to the writer at once, not at the interval."""
        self.patch(logbackend, "FLUSH_INTERVAL", 60)
        backend, path = self.backend(buffer_size=4)
        backend.startService()
        self.addCleanup(backend.stopService)
        backend.write(event(1))
        backend.write(event(2))
        await _lines_written(path, 2)
        with open(path, "rb") as f:
            self.assertEqual([orjson.loads(line)["auditID"] for line in f], ["id-1", "id-2"])

    async def test_filled_batch_handed_over_early(self):
        """Events given as templates and values are handed over early alike."""
        self.patch(logbackend, "FLUSH_INTERVAL", 60)
        template = (None, '{"auditID":"', '","requestReceivedTimestamp":"', '","stageTimestamp":"',
                    '"}\n')
        backend, path = self.backend(buffer_size=4)
        backend.startService()
        self.addCleanup(backend.stopService)
        backend.write_filled(template, "id-1", T0, T0)
        backend.write_filled(template, "id-2", T0, T0)
        await _lines_written(path, 2)
        with open(path, "rb") as f:
            self.assertEqual([orjson.loads(line)["auditID"] for line in f], ["id-1", "id-2"])

    async def test_event_read_when_written(self):
        """An event without bodies is read when written: later changes to its dict are not logged."""
        self.patch(logbackend, "FLUSH_INTERVAL", 60)    # the writer waits for the stop
        backend, path = self.backend()
        backend.startService()
        written = event(1)
        backend.write(written)
        written["auditID"] = "changed"
        written["user"]["username"] = "mallory"
        await backend.stopService()
        with open(path, "rb") as f:
            (line,) = [orjson.loads(line) for line in f]
        self.assertEqual((line["auditID"], line["user"]["username"]), ("id-1", "alice"))

    async def test_unencodable_event_skipped(self):
        """An event that cannot be encoded is counted and logged; the others are written."""
        backend, path = self.backend()
        backend.startService()
        backend.write(event(1))
        backend.write(event(2, annotations={"x": object()}))
        backend.write(event(3, requestObject=Body(b'{"a": 1}', b"application/json"),
                            annotations={"x": object()}))
        backend.write(event(4))
        await backend.stopService()
        with open(path, "rb") as f:
            self.assertEqual([orjson.loads(line)["auditID"] for line in f], ["id-1", "id-4"])
        self.assertEqual(backend.write_errors, 2)
        self.assertEqual(len(self.flushLoggedErrors()), 0)

    async def test_filled_by_the_writer(self):
        """
        Events handed as a template and values are made lines by the writer,
        in order with the others; one that cannot be is counted and logged.
        """
        template = (None, '{"auditID":"', '","requestReceivedTimestamp":"', '","stageTimestamp":"',
                    '"}\n')
        backend, path = self.backend()
        verifyObject(IAuditLineSink, backend)
        backend.startService()
        backend.write_filled(template, "id-1", T0, T0 + 0.0000015)
        backend.write(event(2))
        backend.write_filled(template[:2], "id-3", T0, T0)
        backend.write_filled(template, 'id-"4"', T0, T0 + 1)
        backend.write(event(5))
        backend.write(event(6))
        # Lines of events in a row share one buffer: five runs, four entries each.
        self.assertEqual(len(backend._gathered), 20)
        await backend.stopService()
        with open(path, "rb") as f:
            lines = [orjson.loads(line) for line in f]
        self.assertEqual([line["auditID"] for line in lines],
                         ["id-1", "id-2", 'id-"4"', "id-5", "id-6"])
        self.assertEqual([(line["requestReceivedTimestamp"], line["stageTimestamp"])
                          for line in (lines[0], lines[2])],
                         [("2021-04-09T07:50:08.250000Z", "2021-04-09T07:50:08.250002Z"),
                          ("2021-04-09T07:50:08.250000Z", "2021-04-09T07:50:09.250000Z")])
        self.assertEqual(backend.write_errors, 1)

    async def test_full_queue_drops_and_counts(self):
        """Past the buffer events are dropped and counted, never waited for (a stalled disk)."""
        backend, path = self.backend(buffer_size=3)
        released = threading.Event()
        self.addCleanup(released.set)
        opened = backend._open
        self.patch(backend, "_open", lambda: _Stalled(opened(), released))
        backend.startService()
        for n in range(5):
            backend.write(event(n))
        self.assertEqual(backend.dropped, 2)
        released.set()
        await backend.stopService()
        with open(path, "rb") as f:
            self.assertEqual([orjson.loads(line)["auditID"] for line in f],
                             ["id-0", "id-1", "id-2"])

    async def test_after_stop_dropped(self):
        """An event after the stop is counted as dropped."""
        backend, path = self.backend()
        backend.startService()
        await backend.stopService()
        backend.write(event())
        self.assertEqual(backend.dropped, 1)

    async def test_legacy_format_file(self):
        """--audit-log-format=legacy writes one text line per event."""
        backend, path = self.backend(fmt="legacy")
        backend.startService()
        backend.write(event())
        await backend.stopService()
        with open(path, "rb") as f:
            self.assertTrue(f.read().startswith(b"2021-04-09T07:50:08.1371Z AUDIT: id="))


class _Stalled:
    """A log file whose writes wait until C{released} is set: a stalled disk."""

    def __init__(self, out, released):
        self._out = out
        self._released = released

    def write(self, data):
        self._released.wait()
        self._out.write(data)

    def flush(self):
        self._out.flush()

    def close(self):
        self._out.close()


async def _lines_written(path, count):
    """Wait until C{path} holds C{count} lines, up to ten seconds on a busy machine."""
    for _ in range(1000):
        await deferLater(reactor, 0.01)
        with open(path, "rb") as f:
            if f.read().count(b"\n") >= count:
                return
