# -*- test-case-name: tests.server.test_health -*-
"""
Health endpoints: C{/healthz}, C{/livez}, C{/readyz} and one path per check.

Machines read the status code (200 healthy, 500 not); people read the
verbose text: one C{[+]<name> ok} line per check, excluded checks as
C{[+]<name> excluded: ok}, then C{healthz check passed}, as the
specification writes it. Failure details go to the log, not to the client.
"""

import inspect
import sys

from twisted.internet import threads
from twisted.internet.defer import Deferred, TimeoutError, maybeDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from orchd.api.query import query_present
from orchd.server.response import write_text

ENDPOINTS = ("healthz", "livez", "readyz")
CHECK_TIMEOUT = 5.0


class HealthCheck:
    """
    A named check; C{check()} returns normally (or an awaitable) when healthy.

    @ivar endpoints: the endpoints that run it.
    """

    def __init__(self, name, check, endpoints=ENDPOINTS):
        self.name = name
        self.check = check
        self.endpoints = tuple(endpoints)


class PostStartHook:
    """A start-up step; its check fails until the step has finished."""

    def __init__(self, name):
        self.name = f"poststarthook/{name}"
        self.done = False

    def finish(self):
        self.done = True

    def check(self):
        if not self.done:
            raise RuntimeError("not finished")


class LogCheck:
    """
    Fails when writing the log has been blocked for two minutes.

    Every minute a thread flushes the process's output streams; if a flush
    hangs (a full disk, a stalled pipe), the last success falls behind.
    """

    INTERVAL = 60.0
    LIMIT = 120.0
    log = Logger()

    def __init__(self, clock, reactor=None, streams=None):
        self._clock = clock
        self._reactor = reactor
        self._streams = streams
        self._last = clock.seconds()
        self._loop = LoopingCall(self._flush)
        self._loop.clock = clock

    def start(self):
        self._loop.start(self.INTERVAL, now=True)

    def stop(self):
        if self._loop.running:
            self._loop.stop()

    def _flush(self):
        if self._reactor is None:
            d = maybeDeferred(self._flush_streams)
        else:
            d = threads.deferToThreadPool(self._reactor, self._reactor.getThreadPool(),
                                          self._flush_streams)
        d.addCallbacks(self._flushed, lambda f: self.log.warn(
            "Flushing the log failed: {error}", error=f.value))
        # Never returned: a flush that hangs must not stop the loop's clock.

    def _flushed(self, _):
        self._last = self._clock.seconds()

    def _flush_streams(self):
        for stream in self._streams or (sys.stdout, sys.stderr):
            stream.flush()

    def check(self):
        if self._clock.seconds() - self._last > self.LIMIT:
            raise RuntimeError("logging blocked")


class Health:
    """
    The checks of the three endpoints, and how they are answered.

    @param livez_grace_period: seconds after start during which unfinished
        post-start hooks count as healthy on C{/livez}.
    """

    log = Logger()

    def __init__(self, clock, livez_grace_period=0.0):
        self._clock = clock
        self._started = clock.seconds()
        self._grace = livez_grace_period
        self._checks = []
        self._sources = []
        self.shutting_down = False
        #: The L{orchd.server.healthmetrics.HealthMetrics} results are counted in, if any.
        self.metrics = None
        self.add(HealthCheck("ping", lambda: None))
        self.add(HealthCheck("shutdown", self._check_shutdown, endpoints=("readyz",)))

    def add(self, check):
        self._checks.append(check)
        return check

    def add_source(self, source):
        """
        Add checks that come and go: C{source()} returns the L{HealthCheck}s
        in force, asked at every request (one per running controller, say).
        """
        self._sources.append(source)

    def post_start_hook(self, name):
        """Register a start-up step; call C{finish()} on the result when it is done."""
        hook = PostStartHook(name)
        self.add(HealthCheck(hook.name, hook.check))
        return hook

    def _check_shutdown(self):
        if self.shutting_down:
            raise RuntimeError("process is shutting down")

    def checks_for(self, endpoint):
        checks = [c for c in self._checks if endpoint in c.endpoints]
        for source in self._sources:
            checks.extend(c for c in source() if endpoint in c.endpoints)
        # The shutdown check reads best last, as upstream prints it.
        return sorted(checks, key=lambda c: c.name == "shutdown")

    async def _run(self, endpoint, check):
        """@return: None when healthy, else the failure's text."""
        error = await self._outcome(endpoint, check)
        if self.metrics is not None:
            self.metrics.record(endpoint, check.name, error is None)
        return error

    async def _outcome(self, endpoint, check):
        if (endpoint == "livez" and check.name.startswith("poststarthook/")
                and self._clock.seconds() - self._started < self._grace):
            return None
        try:
            result = check.check()
            if inspect.isawaitable(result):
                d = Deferred.fromCoroutine(result) if inspect.iscoroutine(result) else result
                d.addTimeout(CHECK_TIMEOUT, self._clock)
                await d
        except TimeoutError:
            return f"timed out after {CHECK_TIMEOUT:g}s"
        except Exception as e:
            return str(e) or e.__class__.__name__
        return None

    async def failures(self, endpoint):
        """C{[(name, error)]} of the checks of C{endpoint} that fail now."""
        failed = []
        for check in self.checks_for(endpoint):
            error = await self._run(endpoint, check)
            if error is not None:
                failed.append((check.name, error))
        return failed

    async def serve(self, request, endpoint, check_name):
        """Answer C{/<endpoint>} (C{check_name} empty) or C{/<endpoint>/<check_name>}."""
        checks = self.checks_for(endpoint)
        if check_name:
            for check in checks:
                if check.name == check_name:
                    error = await self._run(endpoint, check)
                    if error is None:
                        write_text(request, 200, "ok")
                    else:
                        self.log.info("{endpoint} check {name} failed: {error}",
                                      endpoint=endpoint, name=check.name, error=error)
                        write_text(request, 500, f"internal server error: {error}\n")
                    return
            write_text(request, 404, "404 page not found\n")
            return
        excluded = _query_values(request, b"exclude")
        lines, failed = [], []
        for check in checks:
            if check.name in excluded:
                excluded.discard(check.name)
                lines.append(f"[+]{check.name} excluded: ok")
                continue
            error = await self._run(endpoint, check)
            if error is None:
                lines.append(f"[+]{check.name} ok")
            else:
                failed.append(check.name)
                lines.append(f"[-]{check.name} failed: reason withheld")
                self.log.info("{endpoint} check {name} failed: {error}",
                              endpoint=endpoint, name=check.name, error=error)
        if excluded:
            quoted = ",".join(f'"{name}"' for name in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        if failed:
            write_text(request, 500, "\n".join(lines) + "\nhealthz check failed\n")
        elif query_present(request.args, "verbose"):
            write_text(request, 200, "\n".join(lines) + "\nhealthz check passed\n")
        else:
            write_text(request, 200, "ok")


def _query_values(request, key):
    return {v.decode("utf-8", "replace") for v in request.args.get(key, [])}
