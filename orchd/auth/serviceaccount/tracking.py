# -*- test-case-name: tests.auth.test_serviceaccount -*-
"""
Legacy token tracking: the day a legacy token last authenticated, on its Secret.

The cleaner controller reads the C{orch.io/legacy-token-last-used}
annotation to find secret tokens nobody uses any more. Authentication
must not wait on, or fail because of, this bookkeeping, so the write runs
on its own; it happens at most once per secret per day (upstream writes
only when the recorded date is not today's), and never twice at once.
"""

import time

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from orchd.api.errors import StatusError

LAST_USED = "orch.io/legacy-token-last-used"
INVALID_SINCE = "orch.io/legacy-token-invalid-since"


def utc_date(seconds):
    """C{YYYY-MM-DD}, the UTC date of a Unix time."""
    return time.strftime("%Y-%m-%d", time.gmtime(seconds))


class LegacyTokenTracker:
    """
    @param secrets: a callable returning the secrets provider (a
        L{orchd.registry.generic.ResourceStore}); late-bound, since the
        catalog is built after the authenticators' table.
    @param system_context: C{namespace -> RequestContext} for our own writes.
    @param clock: an C{IReactorTime}.
    """

    log = Logger()

    def __init__(self, secrets, system_context, clock):
        self._secrets = secrets
        self._system_context = system_context
        self.clock = clock
        self._day = None
        #: (namespace, name) of the secrets written (or being written) today.
        self._done = set()

    def note(self, secret):
        """
        Record that C{secret}'s token was just used; returns the write's
        Deferred, or None when nothing needs writing.
        """
        today = utc_date(self.clock.seconds())
        meta = secret.get("metadata") or {}
        if (meta.get("annotations") or {}).get(LAST_USED) == today:
            return None
        if today != self._day:
            self._day, self._done = today, set()
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if key in self._done:
            return None
        self._done.add(key)
        d = Deferred.fromCoroutine(self._write(key, today))
        d.addErrback(lambda f: self.log.failure("Recording legacy token use failed", f))
        return d

    async def _write(self, key, today):
        namespace, name = key

        def stamp(current):
            annotations = current["metadata"].setdefault("annotations", {})
            annotations[LAST_USED] = today
            return current

        try:
            await self._secrets().patch(self._system_context(namespace), name, stamp)
        except StatusError as e:
            # The secret went away or the write lost too many races: try again
            # on a later use, not now.
            self._done.discard(key)
            self.log.debug("Cannot record legacy token use on {namespace}/{name}: {error}",
                           namespace=namespace, name=name, error=e)
