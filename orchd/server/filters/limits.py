# -*- test-case-name: tests.server.test_limits -*-
"""
Bounds on concurrent work: requests in flight, by priority level.

Past a bound the server answers 429 with Retry-After at once instead of
queueing without limit; long-running requests (watches, proxied streams)
are not counted.

The levels are upstream's default API Priority and Fairness levels that
matter here, as bounds without queues: the cluster's administrators
(C{system:masters}) and health probes are exempt; nodes' heartbeats (their
Node objects and Leases) have seats of their own, and so has the rest of
what nodes ask, so that neither a burst of other writes nor the nodes'
own pod and event traffic can refuse a heartbeat and get a healthy node
marked Unknown; everyone else shares the read and write bounds of
C{--max-requests-inflight} and C{--max-mutating-requests-inflight}.

The limiter also keeps the peak of reads and of writes over the last
second, which C{apiserver_current_inflight_requests} reports (upstream's
watermark).
"""

import time

from orchd.api.errors import StatusError
from orchd.auth.authz.node import NODE_LEASE_NAMESPACE, NODES_GROUP
from orchd.auth.user import MASTERS

_READ_VERBS = frozenset(("get", "list", "watch"))
LONG_RUNNING_VERBS = frozenset(("watch",))
#: Streamed subresources (a followed log never ends), as upstream's default check.
LONG_RUNNING_SUBRESOURCES = frozenset(("proxy", "log", "exec", "attach", "portforward"))


#: The window of the peak L{InflightLimiter.peak} reports, in seconds.
PEAK_WINDOW = 1.0

#: Priority levels (upstream's names); reads and writes of everyone else
#: are bounded apart, as "read" and "write".
EXEMPT = "exempt"
NODE_HIGH = "node-high"
SYSTEM = "system"

#: Non-resource paths of health probes, exempt as upstream's "probes" flow schema.
_PROBES = frozenset(("/healthz", "/livez", "/readyz"))
_PROBE_CHECKS = ("/healthz/", "/livez/", "/readyz/")


def priority_level(info, user):
    """The level of a request of C{user}: a level name above, or "read"/"write"."""
    groups = user.groups
    if MASTERS in groups:
        return EXEMPT
    if NODES_GROUP in groups and info.is_resource_request:
        if info.resource == "nodes" or (info.resource == "leases"
                                        and info.namespace == NODE_LEASE_NAMESPACE):
            return NODE_HIGH
        return SYSTEM
    if not info.is_resource_request and (info.path in _PROBES
                                         or info.path.startswith(_PROBE_CHECKS)):
        return EXEMPT
    return _kind(info)


def _kind(info):
    """Whether a request counts as a read or a write (non-resource paths read)."""
    return "read" if (not info.is_resource_request or info.verb in _READ_VERBS) else "write"


class InflightLimiter:
    """
    @param max_node_requests: the seats of each of the nodes' two levels;
        by default as many as C{max_writes}. 0 is no bound, as for the others.
    """

    def __init__(self, max_reads=400, max_writes=200, max_node_requests=None,
                 now=time.monotonic):
        nodes = max_writes if max_node_requests is None else max_node_requests
        self._limits = {"read": max_reads, "write": max_writes, NODE_HIGH: nodes,
                        SYSTEM: nodes, EXEMPT: 0}
        self._counts = dict.fromkeys(self._limits, 0)
        #: Requests in flight as reads and writes, all levels together (the peaks).
        self._kind_counts = {"read": 0, "write": 0}
        self._now = now
        self._window = now()
        self._peaks = {"read": 0, "write": 0}
        self._previous = {"read": 0, "write": 0}

    def acquire(self, info, user):
        """
        Take a slot for a request of C{user}, or raise 429.

        @return: the slot, to give back to L{release}; None when the
            request is not counted.
        """
        if info.verb in LONG_RUNNING_VERBS or (
                info.is_resource_request and info.subresource in LONG_RUNNING_SUBRESOURCES):
            return None
        level = priority_level(info, user)
        limit = self._limits[level]
        if limit and self._counts[level] >= limit:
            raise StatusError.too_many_requests(
                "the server is currently unable to handle the request")
        self._counts[level] += 1
        kind = _kind(info)
        count = self._kind_counts[kind] = self._kind_counts[kind] + 1
        now = self._now()
        if now - self._window >= PEAK_WINDOW:
            self._roll(now)
        if count > self._peaks[kind]:
            self._peaks[kind] = count
        return (level, kind)

    def _roll(self, now):
        fresh = now - self._window < 2 * PEAK_WINDOW
        self._previous = self._peaks if fresh else dict(self._kind_counts)
        self._peaks = dict(self._kind_counts)
        self._window = now

    def peak(self, slot):
        """The most requests of class C{slot} (read, write) in flight at once in the last second."""
        now = self._now()
        if now - self._window >= PEAK_WINDOW:
            self._roll(now)
        return max(self._kind_counts[slot], self._peaks[slot], self._previous[slot])

    def release(self, slot):
        if slot is not None:
            level, kind = slot
            self._counts[level] -= 1
            self._kind_counts[kind] -= 1
