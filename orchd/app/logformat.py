# -*- test-case-name: tests.app.test_logformat -*-
"""
The process's log: text by default, or with C{--log-format=json} every log
event as one JSON object per line.

twistd picks its log observer after C{makeService}, from the application's
C{ILogObserver} component when one is set; L{ProcessLogging} sets it when
twistd adds it to the application, writing where twistd would have
written (the C{--logfile}, or standard output with C{-n}).

Text lines read as twistd's own (C{<time> [<namespace>#<level>] <message>}).
A JSON line has C{time}, C{level}, C{namespace}, C{message} (the formatted
text), the event's own plain fields (a request line's verb, uri, status,
...), and C{traceback} for a failure.

With a line per API request, the log is on the hot path: twistd's observer
formats each event's time afresh and flushes the file after each line,
which costs more than serving a small GET. L{LogWriter} keeps the time
text of the current second and writes the lines of some tens of
milliseconds with one write and one flush; L{message} gives twisted's text
of an event without re-reading its format and wrapping every field on each
line.
"""

import datetime
import string
import sys
import threading
import time

import orjson
from twisted.application.service import MultiService
from twisted.logger import ILogObserver, formatEvent
from twisted.python.logfile import LogFile
from twisted.python.threadable import isInIOThread
from zope.interface import implementer

from orchd.timing.seconds import second_text

_PLAIN = (str, int, float, bool, type(None))
#: Seconds a line logged on the reactor's thread may wait for the lines after it.
FLUSH_DELAY = 0.05
#: Keys of legacy (twisted.python.log) events that are not the event's own fields.
_LEGACY = frozenset(("message", "isError", "system", "time", "format", "printed", "why",
                     "failure"))


#: Format strings read by L{message}: the text between fields, and each
#: field's (name, conversion, spec); None for one it leaves to twisted.
_FORMATS = {}
#: Formats kept at most (messages are format strings fixed in the code; this
#: bounds the table should some code log a new format string each time).
_MAX_FORMATS = 2000
_CONVERSIONS = {None: None, "s": str, "r": repr, "a": ascii}
_UNREAD = object()


def _read_format(text):
    """C{text}'s pieces, or None unless every field is a plain name (no C{.}, C{[]}, C{()})."""
    pieces = []
    try:
        for literal, field, spec, conversion in string.Formatter().parse(text):
            if field is None:
                pieces.append((literal, None, None, ""))
                continue
            if (not field.isidentifier() or "{" in spec
                    or conversion not in _CONVERSIONS):
                return None
            pieces.append((literal, field, _CONVERSIONS[conversion], spec))
    except ValueError:
        return None
    return tuple(pieces)


def message(event):
    """
    C{twisted.logger.formatEvent(event)}, the same text, for less.

    twisted re-parses the format on every event, wraps each field to
    support C{{name()}} calls and evaluates a C{typing} cast; with a line
    per API request that cost more than the rest of the line. A format whose
    fields are plain names (C{{verb}}, C{{latency_ms:.1f}}, C{{error!r}}) is
    parsed once and filled here; anything else, or any error (a missing
    field, a failing C{repr}), goes to twisted, which words it as it does.
    """
    text = event.get("log_format")
    if type(text) is not str or "log_flattened" in event:
        return formatEvent(event)
    pieces = _FORMATS.get(text, _UNREAD)
    if pieces is _UNREAD:
        pieces = _read_format(text)
        if len(_FORMATS) < _MAX_FORMATS:
            _FORMATS[text] = pieces
    if pieces is None:
        return formatEvent(event)
    try:
        out = []
        for literal, field, convert, spec in pieces:
            out.append(literal)
            if field is not None:
                value = event[field]
                if convert is not None:
                    value = convert(value)
                out.append(format(value, spec))
        return "".join(out)
    except Exception:
        return formatEvent(event)


@implementer(ILogObserver)
class LogWriter:
    """
    Writes each event to C{out} (a text file) as the line C{line_of(event)}
    makes; lines logged close together go out together.

    Events may come from any thread. While the reactor is not running (at
    start and after it stops) each line is written at once, so that nothing
    waits for a turn that will not come. Lines logged on the reactor's own
    thread go out L{FLUSH_DELAY} seconds after the first of them: requests
    that come one at a time (Lease renewals) each have a turn of their own,
    and a write per turn was a system call per request. C{callFromThread},
    for lines of other threads, also wakes the reactor through its pipe (two
    more system calls and a loop iteration).
    """

    def __init__(self, out, line_of, reactor=None, in_reactor_thread=isInIOThread):
        if reactor is None:
            from twisted.internet import reactor
        self._out = out
        self._line_of = line_of
        self._reactor = reactor
        self._in_reactor_thread = in_reactor_thread
        self._pending = []
        self._lock = threading.Lock()

    def __call__(self, event):
        line = self._line_of(event)
        with self._lock:
            self._pending.append(line)
            first = len(self._pending) == 1
        if not self._reactor.running:
            self.flush()
        elif first:
            if self._in_reactor_thread():
                self._reactor.callLater(FLUSH_DELAY, self.flush)
            else:
                self._reactor.callFromThread(self.flush)

    def flush(self):
        """Write and flush every line waiting."""
        with self._lock:
            lines, self._pending = self._pending, []
        if lines:
            self._out.write("".join(lines))
            self._out.flush()


#: The time text of a line's second (local time, as twistd writes it).
_line_time = second_text(lambda second: time.strftime("%Y-%m-%dT%H:%M:%S%z",
                                                     time.localtime(second)))


def text_line(event, _time=_line_time):
    """The text line of one twisted.logger event, as twistd's classic format."""
    system = event.get("log_system")
    if system is None:
        level = event.get("log_level")
        system = f"{event.get('log_namespace', '-')}#{level.name if level is not None else '-'}"
    text = message(event)
    failure = event.get("log_failure")
    if failure is not None:
        text = f"{text}\n{failure.getTraceback()}"
    text = text.replace("\n", "\n\t")
    return f"{_time(event.get('log_time', 0))} [{system}] {text}\n"


def event_line(event):
    """The JSON line (text, newline included) of one twisted.logger event."""
    when = datetime.datetime.fromtimestamp(event.get("log_time", 0), datetime.timezone.utc)
    level = event.get("log_level")
    record = {
        "time": when.isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "level": level.name if level is not None else "info",
        "namespace": event.get("log_namespace", ""),
        "message": message(event),
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


#: The line makers of C{--log-format}.
LINES = {"text": text_line, "json": event_line}


class ProcessLogging(MultiService):
    """
    The top service: its parent (twistd's application) gets a L{LogWriter}
    of C{log_format}'s lines as its log observer.
    """

    def __init__(self, service, server_options, log_format="text"):
        super().__init__()
        self._server_options = server_options
        self._line_of = LINES[log_format]
        self.writer = None
        service.setServiceParent(self)

    def setServiceParent(self, parent):
        set_component = getattr(parent, "setComponent", None)
        if set_component is not None:
            self.writer = LogWriter(twistd_log_file(self._server_options), self._line_of)
            set_component(ILogObserver, self.writer)
        super().setServiceParent(parent)

    def stopService(self):
        # The lines of the last turns, before the reactor stops turning.
        stopped = super().stopService()
        if self.writer is not None:
            self.writer.flush()
        return stopped
