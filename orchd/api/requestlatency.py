# -*- test-case-name: tests.server.test_requestmetrics -*-
"""
Time a request spends waiting on others, reported from wherever it is spent.

C{apiserver_request_sli_duration_seconds} is a request's latency minus the
time admission webhooks took (upstream's latency tracker), so that a slow
webhook does not burn the API server's SLO. Webhook calls run deep in the
registry, far from the request; the API server puts the request's timing
in a context variable, which Twisted carries across the coroutine's
awaits, and the webhook code adds its time here:

    from orchd.api.requestlatency import add_webhook_time
    started = clock.seconds()
    ...call the webhook...
    add_webhook_time(clock.seconds() - started)

Outside a request (controllers, tests) it does nothing.
"""

from contextvars import ContextVar

_current = ContextVar("orchd_request_timing", default=None)


class RequestTiming:
    """
    One request's timing as the metrics read it.

    Every request makes one, so only C{start} is set at first; the rest
    starts as the class's default.

    @ivar start: the timer's reading when the request arrived.
    @ivar excluded: seconds spent in admission webhooks, left out of the SLI.
    @ivar key: the request's metric labels, once known.
    @ivar series: what those labels count into (the metrics' own, opaque here).
    @ivar longrunning: whether it is counted when it ends (a watch, a stream).
    """

    excluded = 0.0
    key = series = None
    longrunning = False

    def __init__(self, start):
        self.start = start


#: C{begin(timing)}: make C{timing} the current request's (within the calling
#: coroutine's context). The context variable's own method: every request calls it.
begin = _current.set


def current():
    """The current request's L{RequestTiming}, or None outside a request."""
    return _current.get()


def add_webhook_time(seconds):
    """Count C{seconds} spent calling admission webhooks against the current request."""
    timing = _current.get()
    if timing is not None:
        timing.excluded += seconds
