# -*- test-case-name: tests.server.test_limits -*-
"""
Bounds on concurrent work: requests in flight, split into reads and writes.

Past a bound the server answers 429 with Retry-After at once instead of
queueing without limit; long-running requests (watches, proxied streams)
are not counted.

The limiter also keeps each class's peak over the last second, which
C{apiserver_current_inflight_requests} reports (upstream's watermark).
"""

import time

from orchd.api.errors import StatusError

_READ_VERBS = frozenset(("get", "list", "watch"))
LONG_RUNNING_VERBS = frozenset(("watch",))
#: Streamed subresources (a followed log never ends), as upstream's default check.
LONG_RUNNING_SUBRESOURCES = frozenset(("proxy", "log", "exec", "attach", "portforward"))


#: The window of the peak L{InflightLimiter.peak} reports, in seconds.
PEAK_WINDOW = 1.0


class InflightLimiter:
    def __init__(self, max_reads=400, max_writes=200, now=time.monotonic):
        self._limits = {"read": max_reads, "write": max_writes}
        self._counts = {"read": 0, "write": 0}
        self._now = now
        self._window = now()
        self._peaks = {"read": 0, "write": 0}
        self._previous = {"read": 0, "write": 0}

    def acquire(self, info):
        """
        Take a slot for a request, or raise 429.

        @return: the slot's class, to give back to L{release}; None when the
            request is not counted.
        """
        if info.verb in LONG_RUNNING_VERBS or (
                info.is_resource_request and info.subresource in LONG_RUNNING_SUBRESOURCES):
            return None
        slot = "read" if (not info.is_resource_request or info.verb in _READ_VERBS) else "write"
        limit = self._limits[slot]
        if limit and self._counts[slot] >= limit:
            raise StatusError.too_many_requests(
                "the server is currently unable to handle the request")
        count = self._counts[slot] = self._counts[slot] + 1
        now = self._now()
        if now - self._window >= PEAK_WINDOW:
            self._roll(now)
        if count > self._peaks[slot]:
            self._peaks[slot] = count
        return slot

    def _roll(self, now):
        fresh = now - self._window < 2 * PEAK_WINDOW
        self._previous = self._peaks if fresh else dict(self._counts)
        self._peaks = dict(self._counts)
        self._window = now

    def peak(self, slot):
        """The most requests of class C{slot} (read, write) in flight at once in the last second."""
        now = self._now()
        if now - self._window >= PEAK_WINDOW:
            self._roll(now)
        return max(self._counts[slot], self._peaks[slot], self._previous[slot])

    def release(self, slot):
        if slot is not None:
            self._counts[slot] -= 1
