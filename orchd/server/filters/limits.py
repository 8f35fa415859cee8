# -*- test-case-name: tests.server.test_limits -*-
"""
Bounds on concurrent work: requests in flight, split into reads and writes.

Past a bound the server answers 429 with Retry-After at once instead of
queueing without limit; long-running requests (watches, proxied streams)
are not counted.
"""

from orchd.api.errors import StatusError

_READ_VERBS = frozenset(("get", "list", "watch"))
LONG_RUNNING_VERBS = frozenset(("watch",))
#: Streamed subresources (a followed log never ends), as upstream's default check.
LONG_RUNNING_SUBRESOURCES = frozenset(("proxy", "log", "exec", "attach", "portforward"))


class InflightLimiter:
    def __init__(self, max_reads=400, max_writes=200):
        self._limits = {"read": max_reads, "write": max_writes}
        self._counts = {"read": 0, "write": 0}

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
        self._counts[slot] += 1
        return slot

    def release(self, slot):
        if slot is not None:
            self._counts[slot] -= 1
