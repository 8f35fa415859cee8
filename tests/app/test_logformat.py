"""--log-format=json: every log event as one JSON object per line."""

import io

import orjson
from twisted.application.service import Application, Service
from twisted.logger import ILogObserver, Logger, LogLevel, LogPublisher
from twisted.trial.unittest import SynchronousTestCase

from orchd.app.logformat import JSONLogging, JSONLogObserver, event_line


class JSONLineTests(SynchronousTestCase):
    def test_event_fields(self):
        """A line has time, level, namespace, the formatted message and the plain fields."""
        out = io.StringIO()
        publisher = LogPublisher(JSONLogObserver(out))
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
        log = Logger(namespace="x", observer=LogPublisher(JSONLogObserver(out)))
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


class JSONLoggingTests(SynchronousTestCase):
    def test_sets_application_observer(self):
        """Added to twistd's application, it becomes the application's log observer."""
        application = Application("orchd")
        inner = Service()
        top = JSONLogging(inner, {"nodaemon": True, "logfile": None})
        top.setServiceParent(application)
        self.assertIsInstance(application.getComponent(ILogObserver), JSONLogObserver)
        self.assertIn(inner, list(top))
