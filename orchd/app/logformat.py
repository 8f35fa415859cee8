# -*- test-case-name: tests.app.test_logformat -*-
"""
C{--log-format=json}: every log event of the process as one JSON object per line.

twistd picks its log observer after C{makeService}, from the application's
C{ILogObserver} component when one is set; L{JSONLogging} sets it when
twistd adds it to the application, writing where twistd would have
written text (the C{--logfile}, or standard output with C{-n}). Each line
has C{time}, C{level}, C{namespace}, C{message} (the formatted text), the
event's own plain fields (a request line's verb, uri, status, ...), and
C{traceback} for a failure.
"""

import datetime
import sys

import orjson
from twisted.application.service import MultiService
from twisted.logger import ILogObserver, formatEvent
from twisted.python.logfile import LogFile
from zope.interface import implementer

_PLAIN = (str, int, float, bool, type(None))
#: Keys of legacy (twisted.python.log) events that are not the event's own fields.
_LEGACY = frozenset(("message", "isError", "system", "time", "format", "printed", "why",
                     "failure"))


@implementer(ILogObserver)
class JSONLogObserver:
    """Writes each event to C{out} (a text file) as one JSON line, flushed."""

    def __init__(self, out):
        self._out = out

    def __call__(self, event):
        self._out.write(event_line(event))
        self._out.flush()


def event_line(event):
    """The JSON line (text, newline included) of one twisted.logger event."""
    when = datetime.datetime.fromtimestamp(event.get("log_time", 0), datetime.timezone.utc)
    level = event.get("log_level")
    record = {
        "time": when.isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "level": level.name if level is not None else "info",
        "namespace": event.get("log_namespace", ""),
        "message": formatEvent(event),
    }
    for key, value in event.items():
        if key.startswith("log_") or key in _LEGACY or key in record:
            continue
        if isinstance(value, _PLAIN):
            record[key] = value
    failure = event.get("log_failure")
    if failure is not None:
        record["traceback"] = failure.getTraceback()
    return orjson.dumps(record).decode("utf-8") + "\n"


def twistd_log_file(server_options):
    """Where twistd would write its log for these (its own) options."""
    if server_options is None:
        return sys.stdout
    name = server_options.get("logfile") or ""
    if name == "-" or (server_options.get("nodaemon") and not name):
        return sys.stdout
    return LogFile.fromFullPath(name or "twistd.log")


class JSONLogging(MultiService):
    """
    The top service with C{--log-format=json}: its parent (twistd's
    application) gets a L{JSONLogObserver} as its log observer.
    """

    def __init__(self, service, server_options):
        super().__init__()
        self._server_options = server_options
        service.setServiceParent(self)

    def setServiceParent(self, parent):
        set_component = getattr(parent, "setComponent", None)
        if set_component is not None:
            set_component(ILogObserver, JSONLogObserver(twistd_log_file(self._server_options)))
        super().setServiceParent(parent)
