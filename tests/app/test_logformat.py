"""The process's log: text or JSON lines, lines logged close together written together."""

import io

import orjson
from twisted.application.service import Application, Service
from twisted.logger import ILogObserver, Logger, LogLevel, LogPublisher, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.logformat import (
    FLUSH_DELAY, LogWriter, ProcessLogging, event_line, message, text_line)


class FakeReactor:
    """Running or not; keeps what is called from threads, to run as a turn's end."""

    def __init__(self, running=True):
        self.running = running
        self.calls = []
        self.woken = False
        self.delays = []

    def callFromThread(self, f, *args):
        self.calls.append((f, args))
        self.woken = True

    def callLater(self, delay, f, *args):
        self.delays.append(delay)
        self.calls.append((f, args))

    def turn(self):
        calls, self.calls = self.calls, []
        for f, args in calls:
            f(*args)


class CountingFile(io.StringIO):
    """A text file counting its writes and flushes."""

    writes = flushes = 0

    def write(self, text):
        self.writes += 1
        return super().write(text)

    def flush(self):
        self.flushes += 1


def json_writer(out):
    """JSON lines, written at once (no reactor running)."""
    return LogWriter(out, event_line, FakeReactor(running=False))


class JSONLineTests(SynchronousTestCase):
    def test_event_fields(self):
        """A line has time, level, namespace, the formatted message and the plain fields."""
        out = io.StringIO()
        publisher = LogPublisher(json_writer(out))
        log = Logger(namespace="orchd.requests", observer=publisher)
        log.info("{verb} {uri} {status}", verb="get", uri="/api/v1/pods", status=200,
                 thing=object())
        (line,) = out.getvalue().splitlines()
        record = orjson.loads(line)
        self.assertEqual(record["level"], "info")
        self.assertEqual(record["namespace"], "orchd.requests")
        self.assertEqual(record["message"], "get /api/v1/pods 200")
        self.assertEqual((record["verb"], record["uri"], record["status"]),
                         ("get", "/api/v1/pods", 200))
        self.assertNotIn("thing", record)
        self.assertTrue(record["time"].endswith("Z"))

    def test_failure_traceback(self):
        """A logged failure carries its traceback."""
        out = io.StringIO()
        log = Logger(namespace="x", observer=LogPublisher(json_writer(out)))
        try:
            1 / 0
        except ZeroDivisionError:
            log.failure("Oops")
        record = orjson.loads(out.getvalue())
        self.assertEqual(record["level"], "critical")
        self.assertIn("ZeroDivisionError", record["traceback"])

    def test_legacy_event(self):
        """A twisted.python.log style event is one line too."""
        line = event_line({"message": ("hello",), "isError": 0, "system": "-",
                           "log_level": LogLevel.info, "log_time": 0.0,
                           "log_format": "{log_text}", "log_text": "hello"})
        self.assertEqual(orjson.loads(line)["message"], "hello")


class TextLineTests(SynchronousTestCase):
    def test_classic_format(self):
        """A text line reads as twistd's: time, [namespace#level], the message, continued lines indented."""
        out = io.StringIO()
        log = Logger(namespace="orchd.requests",
                     observer=LogPublisher(LogWriter(out, text_line, FakeReactor(running=False))))
        log.info("{verb} {status}\nmore", verb="get", status=200)
        line = out.getvalue()
        self.assertRegex(line, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} "
                               r"\[orchd.requests#info\] get 200\n\tmore\n$")

    def test_system_kept(self):
        """A legacy event's system names it, as in twistd's lines."""
        line = text_line({"log_system": "-", "log_format": "hello", "log_time": 0.0})
        self.assertTrue(line.endswith(" [-] hello\n"), line)


class BadFormat:
    def __format__(self, spec):
        raise RuntimeError("no format")

    def __repr__(self):
        return "<BadFormat>"


class Thing:
    name = "thing"

    def size(self):
        return 3


class MessageTests(SynchronousTestCase):
    def test_same_text_as_twisted(self):
        """Every kind of format reads exactly as twisted's formatEvent reads it, errors included."""
        cases = [
            ("{verb} {uri} {user} {status} {latency_ms:.1f}ms audit-id={audit_id}",
             dict(verb="get", uri="/api/v1/pods?x=1", user="", status=200, latency_ms=1.25,
                  audit_id="a-b")),
            ("plain text, no fields", {}),
            ("", {}),
            ("{{literal}} {x!r} {x!s} {x!a} {n:>5d}|{f:08.3f}", dict(x="é'q", n=42, f=3.5)),
            ("{missing} field", {}),
            ("{thing.name} and {thing.size()}", dict(thing=Thing())),
            ("{items[0]}", dict(items=["first"])),
            ("{0} positional", {}),
            ("{x:{width}}", dict(x=1, width=4)),
            ("{bad}", dict(bad=BadFormat())),
            ("{n:d}", dict(n="not a number")),
            ("{x!z}", dict(x=1)),
            ("unbalanced {", {}),
            (b"{verb} as bytes", dict(verb="get")),
            (None, dict(verb="get")),
            ("{log_namespace}#{log_level.name}", dict(log_namespace="ns",
                                                      log_level=LogLevel.warn)),
        ]
        for fmt, fields in cases:
            event = dict(fields, log_format=fmt, log_time=0.0)
            for _ in range(2):   # the first reads the format, the second uses what was read
                self.assertEqual(message(event), formatEvent(event), fmt)

    def test_flattened_left_to_twisted(self):
        """An event flattened for later formatting is formatted as twisted does."""
        from twisted.logger import eventAsJSON, eventFromJSON
        event = eventFromJSON(eventAsJSON({"log_format": "{a.name} {n}", "a": Thing(), "n": 1,
                                           "log_time": 0.0}))
        self.assertEqual(message(event), formatEvent(event))


class LogWriterTests(SynchronousTestCase):
    def test_one_write_a_turn(self):
        """Lines logged together go out in one write and one flush, at a later turn."""
        out, reactor = CountingFile(), FakeReactor()
        writer = LogWriter(out, text_line, reactor)
        log = Logger(namespace="x", observer=LogPublisher(writer))
        for i in range(3):
            log.info("line {i}", i=i)
        self.assertEqual(out.getvalue(), "")
        reactor.turn()
        self.assertEqual(len(out.getvalue().splitlines()), 3)
        self.assertEqual((out.writes, out.flushes), (1, 1))

    def test_woken_only_from_other_threads(self):
        """The reactor's thread leaves the flush to a later turn; another thread wakes it."""
        for in_reactor_thread, woken, delays in ((True, False, [FLUSH_DELAY]), (False, True, [])):
            out, reactor = CountingFile(), FakeReactor()
            writer = LogWriter(out, text_line, reactor, lambda: in_reactor_thread)
            Logger(namespace="x", observer=writer).info("one")
            self.assertEqual((reactor.woken, reactor.delays), (woken, delays))
            reactor.turn()
            self.assertIn("one", out.getvalue())

    def test_at_once_without_reactor(self):
        """While the reactor does not run, each line is written at once."""
        out = CountingFile()
        log = Logger(namespace="x", observer=LogPublisher(
            LogWriter(out, text_line, FakeReactor(running=False))))
        log.info("early")
        self.assertIn("early", out.getvalue())


class ProcessLoggingTests(SynchronousTestCase):
    def test_sets_application_observer(self):
        """Added to twistd's application, it becomes the application's log observer."""
        for log_format, line_of in (("text", text_line), ("json", event_line)):
            application = Application("orchd")
            inner = Service()
            top = ProcessLogging(inner, {"nodaemon": True, "logfile": None}, log_format)
            top.setServiceParent(application)
            observer = application.getComponent(ILogObserver)
            self.assertIsInstance(observer, LogWriter)
            self.assertIs(observer._line_of, line_of)
            self.assertIn(inner, list(top))
