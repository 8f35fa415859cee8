# -*- test-case-name: tests.server.audit.test_logbackend -*-
"""
The audit log file: events gathered on the reactor, written by one thread.

L{LogBackend.write} encodes the event (orjson, or upstream's legacy
one-line text) at once, with the event still in the processor's cache, so
that the line is what the event said when it was emitted; in the JSON
format the auditor hands it most events as their shape's template and the
values to fill in (L{LogBackend.write_filled}, L{orchd.server.audit.lines}),
and those lines are made by the writer thread, in a batch, warm. Every
L{FLUSH_INTERVAL} the reactor hands what has gathered to the writer thread,
which makes and writes the lines, flushes them and rotates the file as
upstream's lumberjack does (L{RotatingFile}); sooner once L{BATCH} events
(or half the buffer) have gathered.

What gathers is one list, four entries an event (a template and its
values), or a run of lines (no template and one growing buffer of the
lines of events in a row given as dicts): not an object per event, as
thousands of objects held together, then freed together, make the
allocator return the memory and fault it back in for the next ones, at
several microseconds a request. An event with request or response bodies
is handed over as it is and encoded by the writer: decoding those can
take long. Handing over once a second rather than per event keeps the
writer from taking the interpreter's lock from the reactor once per
request: each hand-over wakes the writer, which then takes the lock and
the core from the reactor (once a second rather than five times, GETs
audited at Metadata level cost about 1% less CPU). Past
L{DEFAULT_BUFFER} events not yet written the event is dropped and
counted, as upstream's batch mode does past its buffer: the API never
waits for the disk. A clean stop writes everything gathered before the
service has stopped.
"""

import calendar
import collections
import gzip
import os
import re
import shutil
import threading
import time

import orjson
from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from zope.interface import alsoProvides, implementer

from orchd.server.audit.interfaces import IAuditLineSink, IAuditSink
from orchd.server.audit.lines import fill
from orchd.server.audit.record import encode_event
from orchd.timing.seconds import utc_seconds

JSON, LEGACY = "json", "legacy"
FORMATS = (JSON, LEGACY)
#: Upstream's C{--audit-log-batch-buffer-size} default.
DEFAULT_BUFFER = 10000
_MB = 1024 * 1024
_DAY = 86400.0
#: lumberjack's backup timestamp layout, C{2006-01-02T15-04-05.000}, in UTC.
_STAMP = "%Y-%m-%dT%H-%M-%S"
#: How often the writer thread writes what has gathered (seconds).
FLUSH_INTERVAL = 1.0
#: Most events gathered before they are handed over, however soon: the
#: writer makes a batch's lines holding the interpreter's lock (some 2 us a
#: line), and the reactor waits for it.
BATCH = 2000


def legacy_line(event):
    """Upstream's C{EventString}: one line of text per event (bytes, newline included)."""
    user = event.get("user") or {}
    username, groups = "<none>", "<none>"
    if user.get("username"):
        username = user["username"]
        if user.get("groups"):
            groups = ",".join(_quote(g) for g in user["groups"])
    asuser, asgroups = "<self>", "<lookup>"
    impersonated = event.get("impersonatedUser")
    if impersonated is not None:
        asuser = impersonated.get("username", "")
        if impersonated.get("groups") is not None:
            asgroups = ",".join(_quote(g) for g in impersonated["groups"])
    namespace = (event.get("objectRef") or {}).get("namespace") or "<none>"
    status = event.get("responseStatus")
    response = str(status["code"]) if status is not None else "<deferred>"
    ips = event.get("sourceIPs") or ["<unknown>"]
    line = (f'{_rfc3339(event["requestReceivedTimestamp"])} AUDIT: id={_quote(event["auditID"])} '
            f'stage={_quote(event["stage"])} ip={_quote(ips[0])} method={_quote(event["verb"])} '
            f'user={_quote(username)} groups={_quote(groups)} as={_quote(asuser)} '
            f'asgroups={_quote(asgroups)} user-agent={_quote(event.get("userAgent", ""))} '
            f'namespace={_quote(namespace)} uri={_quote(event["requestURI"])} '
            f'response="{response}"\n')
    return line.encode("utf-8")


def _quote(text):
    """Go's C{%q} for the text orchd writes (JSON's escaping is the same for it)."""
    return orjson.dumps(text).decode("utf-8")


def _rfc3339(micro):
    """A MicroTime as Go's C{time.RFC3339Nano}: trailing zeros of the fraction dropped."""
    head, _, fraction = micro[:-1].partition(".")
    fraction = fraction.rstrip("0")
    return f"{head}.{fraction}Z" if fraction else f"{head}Z"


class RotatingFile:
    """
    An append-only file that rotates past a size, as lumberjack does.

    The full file is renamed C{<name>-<UTC timestamp>.<ext>} (gzipped with
    C{compress}); backups beyond C{max_backups} or older than C{max_age_days}
    (read from the timestamp in their name) are removed. 0 means no limit.
    Not thread-safe: one writer thread owns it.
    """

    def __init__(self, path, max_size_mb=0, max_backups=0, max_age_days=0, compress=False,
                 now=time.time):
        self.path = path
        self.max_size = max_size_mb * _MB
        self.max_backups = max_backups
        self.max_age = max_age_days * _DAY
        self.compress = compress
        self.now = now
        directory, name = os.path.split(os.path.abspath(path))
        self._dir = directory
        self._prefix, self._ext = os.path.splitext(name)
        self._prefix += "-"
        self._pattern = re.compile(
            re.escape(self._prefix) + r"(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3})"
            + re.escape(self._ext) + r"(\.gz)?$")
        os.makedirs(directory, exist_ok=True)
        self._file = open(path, "ab")
        os.chmod(path, 0o600)
        self._size = self._file.tell()

    def write(self, data):
        if self.max_size and self._size and self._size + len(data) > self.max_size:
            self.rotate()
        self._file.write(data)
        self._size += len(data)

    def flush(self):
        self._file.flush()

    def close(self):
        self._file.close()

    def backup_name(self, seconds):
        whole = int(seconds)
        stamp = time.strftime(_STAMP, time.gmtime(whole))
        return os.path.join(self._dir, f"{self._prefix}{stamp}.{int((seconds - whole) * 1000):03d}"
                                       f"{self._ext}")

    def rotate(self):
        """Start a new file; the full one becomes a backup."""
        self._file.close()
        backup = self.backup_name(self.now())
        os.rename(self.path, backup)
        self._file = open(self.path, "ab")
        os.chmod(self.path, 0o600)
        self._size = 0
        if self.compress:
            with open(backup, "rb") as source, gzip.open(backup + ".gz", "wb") as target:
                shutil.copyfileobj(source, target)
            os.chmod(backup + ".gz", 0o600)
            os.remove(backup)
        self._prune()

    def backups(self):
        """C{(timestamp seconds, path)} of each backup, newest first."""
        found = []
        for name in os.listdir(self._dir):
            match = self._pattern.match(name)
            if match:
                stamp, millis = match.group(1).rsplit(".", 1)
                seconds = calendar.timegm(time.strptime(stamp, _STAMP))
                found.append((seconds + int(millis) / 1000, os.path.join(self._dir, name)))
        found.sort(reverse=True)
        return found

    def _prune(self):
        backups = self.backups()
        doomed = []
        if self.max_backups:
            doomed += backups[self.max_backups:]
            backups = backups[:self.max_backups]
        if self.max_age:
            cutoff = self.now() - self.max_age
            doomed += [b for b in backups if b[0] < cutoff]
        for _, path in doomed:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass


class _Stdout:
    """C{--audit-log-path=-}: the process's real standard output, never rotated."""

    def write(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]

    def flush(self):
        pass

    def close(self):
        pass


@implementer(IAuditSink)
class LogBackend(Service):
    """
    The C{--audit-log-*} backend; in the JSON format it takes events as
    templates and values too (L{IAuditLineSink}).

    @ivar dropped: events dropped because the queue was full.
    """

    log = Logger()

    def __init__(self, reactor, path, max_size_mb=0, max_backups=0, max_age_days=0,
                 compress=False, fmt=JSON, buffer_size=DEFAULT_BUFFER, now=time.time):
        self.reactor = reactor
        self.path = path
        self._rotation = (max_size_mb, max_backups, max_age_days, compress)
        self._encode = encode_event if fmt == JSON else legacy_line
        if fmt == JSON:
            alsoProvides(self, IAuditLineSink)
        self._buffer_size = buffer_size
        #: Events gathered before a hand-over comes early: at most half the
        #: buffer, so that a small one does not fill while they wait.
        self._batch = max(1, min(BATCH, buffer_size // 2))
        self._now = now
        #: Events gathered since the last hand-over (the reactor's alone), four
        #: entries each: a template and its values, or None and the lines of
        #: events in a row given as dicts (C{_growing}, while it grows).
        self._gathered = []
        self._growing = None
        #: The hand-over's timer, while lines are gathering.
        self._timer = None
        #: Handed to the writer: C{(gathered, events)}, or C{(event dict, 1)} for bodies.
        self._handed = collections.deque()
        #: Events taken (counted by the reactor alone), and when last handed over.
        self._accepted = self._handed_upto = 0
        #: Events the writer is done with (counted by the writer alone).
        self._written = 0
        self._wake = threading.Event()
        self._stopping = False
        self._thread = None
        self._stopped = None
        #: The writer thread's text of the second (L{utc_seconds}).
        self._utc_second = utc_seconds()
        self.dropped = 0
        self.write_errors = 0

    def _open(self):
        if self.path == "-":
            return _Stdout()
        return RotatingFile(self.path, *self._rotation, now=self._now)

    def startService(self):
        out = self._open()
        super().startService()
        self._stopped = Deferred()
        self._thread = threading.Thread(target=self._run, args=(out,), name="orchd-audit-log",
                                        daemon=True)
        self._thread.start()

    def write(self, event):
        if "requestObject" in event or "responseObject" in event:
            if self._full():
                return
            # Bodies: decoded on the writer thread, after the lines before them.
            self._hand_over()
            self._handed.append((event, 1))
            self._accepted = self._handed_upto = self._accepted + 1
            return
        try:
            line = self._encode(event)
        except Exception as e:   # a bug: keep the other events
            self.write_errors += 1
            self.log.error("Audit log: cannot encode an event: {error}", error=e)
            return
        if self._full():
            return
        run = self._growing
        if run is None:
            # Lines in a row share one buffer (see the module).
            run = self._growing = bytearray()
            self._gathered += (None, run, None, None)
        run += line
        self._taken()

    def write_filled(self, template, audit_id, received, stamp):
        if self._full():
            return
        self._gathered += (template, audit_id, received, stamp)
        self._growing = None
        self._taken()

    def _taken(self):
        """Count an event taken; hand over once a batch has gathered, else arm the timer."""
        self._accepted += 1
        if self._accepted - self._handed_upto >= self._batch:
            self._hand_over()
        elif self._timer is None:
            self._timer = self.reactor.callLater(FLUSH_INTERVAL, self._hand_over)

    def _full(self):
        """Whether an event must be dropped (counted) rather than taken."""
        if self.running and self._accepted - self._written < self._buffer_size:
            return False
        self._drop()
        return True

    def _hand_over(self):
        """Give the writer the lines gathered so far, and wake it."""
        timer, self._timer = self._timer, None
        if timer is not None and timer.active():
            timer.cancel()
        if self._gathered:
            self._handed.append((self._gathered, self._accepted - self._handed_upto))
            self._gathered = []
            self._growing = None
            self._handed_upto = self._accepted
        self._wake.set()

    def _lines(self, gathered):
        """
        On the writer thread: the lines of gathered events, in one buffer
        (each line made is let go at once, its memory reused by the next).
        """
        utc_second, lines = self._utc_second, bytearray()
        for template, value, received, stamp in zip(gathered[::4], gathered[1::4],
                                                    gathered[2::4], gathered[3::4]):
            if template is None:
                lines += value
                continue
            try:
                lines += fill(template, value, received, stamp, utc_second)
            except Exception as e:   # a bug: keep the other events
                self._failed_late(e)
        return lines

    def _encode_late(self, event):
        """On the writer thread: the line of an event queued with its bodies."""
        try:
            return self._encode(event)
        except Exception as e:   # a bug: keep the other events
            self._failed_late(e)
            return b""

    def _failed_late(self, error):
        """On the writer thread: an event could not be made a line."""
        self.write_errors += 1
        self.reactor.callFromThread(
            self.log.error, "Audit log: cannot encode an event: {error}", error=error)

    def _drop(self):
        self.dropped += 1
        if self.dropped == 1 or self.dropped % 10000 == 0:
            self.log.warn("Audit log: {dropped} events dropped so far (the writer is behind or "
                          "stopped)", dropped=self.dropped)

    def stopService(self):
        """Stop taking events; fire once every one taken is written and the file closed."""
        super().stopService()
        if self._thread is None:
            return None
        self._thread = None
        # Everything is handed over before the writer is told to stop after it.
        self._hand_over()
        self._stopping = True
        self._wake.set()
        return self._stopped

    def _run(self, out):
        """The writer thread: what was handed over since it last woke, then one flush."""
        handed = self._handed
        while True:
            self._wake.wait()
            self._wake.clear()
            # Read before the queue: once set, everything has been handed over.
            stopping = self._stopping
            while handed:
                item, events = handed.popleft()
                data = self._lines(item) if type(item) is list else self._encode_late(item)
                try:
                    out.write(data)
                except Exception as e:
                    self._write_failed(events, e)
                self._written += events
            try:
                out.flush()
            except Exception as e:
                self._write_failed(0, e)
            if stopping:
                break
        try:
            out.close()
        finally:
            self.reactor.callFromThread(self._stopped.callback, None)

    def _write_failed(self, events, error):
        self.write_errors += events
        self.reactor.callFromThread(
            self.log.error, "Audit log: cannot write {count} events to {path}: {error}",
            count=events, path=self.path, error=error)
