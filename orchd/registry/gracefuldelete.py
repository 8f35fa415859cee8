# -*- test-case-name: tests.registry.test_graceful_delete -*-
"""
Graceful deletion: an object that must be given time to go is marked, not removed.

Upstream's C{rest.BeforeDelete}. A kind whose strategy names a grace
period for an object (pods bound to a node and not finished: see
L{orchd.registry.kinds.pod}) is deleted in two steps: the first DELETE
sets C{deletionTimestamp} (now plus the grace period) and
C{deletionGracePeriodSeconds} and keeps the object, so that whoever runs
it (the node agent) can stop it; a later DELETE with grace period 0
removes it. Meanwhile a DELETE may shorten the grace period, never
lengthen it: one asking for as long or longer changes nothing (the
deletion is pending). An object marked with grace period 0 (or none) is
removed by the next DELETE. Finalizers still hold an object whose grace
period is over, as for any kind.
"""

from orchd.api import meta as metadata
from orchd.api.printers.base import parse_time

#: The outcomes of L{before_delete}.
NOW = "now"                  # not graceful: remove (or leave to finalizers) as any kind
GRACEFUL = "graceful"        # marked (or its grace shortened): write the mark
PENDING = "pending"          # already marked with no shorter grace: nothing to write


def before_delete(strategy, ctx, obj, requested, now):
    """
    Decide a DELETE of C{obj}, marking it (in place) when it is graceful.

    @param requested: the request's C{gracePeriodSeconds}, or None.
    @param now: the clock's seconds.
    @return: C{(outcome, grace)}: one of L{NOW}, L{GRACEFUL}, L{PENDING},
        and the grace period now in force (for L{GRACEFUL}: 0 means the
        object may go at once).
    """
    if requested is not None and requested < 0:
        requested = 1            # upstream: negative values are read as 1 s
    meta = obj["metadata"]
    current = meta.get("deletionGracePeriodSeconds")
    if isinstance(current, int) and current < 0:
        current = meta["deletionGracePeriodSeconds"] = 1
    if meta.get("deletionTimestamp"):
        if not current:
            # Marked with grace 0 (or none): the first step succeeded, this one removes it.
            return NOW, 0
        if requested is None or requested >= current:
            return PENDING, current
        started = parse_time(meta["deletionTimestamp"])
        started = now if started is None else started - current
        meta["deletionTimestamp"] = metadata.rfc3339(started + requested)
        meta["deletionGracePeriodSeconds"] = requested
        return GRACEFUL, requested
    period = strategy.graceful_delete_period(ctx, obj, requested)
    if period is None:
        return NOW, 0
    meta["deletionTimestamp"] = metadata.rfc3339(now + period)
    meta["deletionGracePeriodSeconds"] = period
    if meta.get("generation", 0) > 0:
        meta["generation"] = meta["generation"] + 1
    return GRACEFUL, period
