# -*- test-case-name: tests.controllers.test_expectations -*-
"""
Expectations: what a controller is waiting to see in its informer before it
acts again on an owner (upstream's C{ControllerExpectations} and
C{UIDTrackingControllerExpectations}, C{controller_utils.go}).

A replica set controller that created 10 pods must not count its pods again
until its cache holds those 10, or a cache that lags behind the store would
make it create 10 more. So, before writing, it records how many creations
it expects and which pods it is deleting; the informer's handlers lower the
counts as the pods appear or go (a deletion counts once the pod has a
C{deletionTimestamp}); and a sync acts only when both counts are down to
zero, or when they are older than L{TIMEOUT} (a lost event must not stop
the owner for ever).
"""

#: Upstream's C{ExpectationsTimeout}: 5 minutes.
TIMEOUT = 300.0


class _Expected:
    __slots__ = ("add", "delete", "deleting", "since")

    def __init__(self, add, delete, since, deleting=()):
        self.add = add
        self.delete = delete
        self.since = since
        self.deleting = set(deleting)


class Expectations:
    """
    Expected creations and deletions per owner key (C{namespace/name}).

    @param clock: an C{IReactorTime}, for the timeout.
    """

    def __init__(self, clock, timeout=TIMEOUT):
        self._clock = clock
        self._timeout = timeout
        self._expected = {}

    def satisfied(self, key):
        """
        True if the owner may act: nothing expected, everything seen, or the
        expectations expired.
        """
        expected = self._expected.get(key)
        if expected is None:
            return True
        if expected.add <= 0 and expected.delete <= 0:
            return True
        return self._clock.seconds() - expected.since > self._timeout

    def expect_creations(self, key, count):
        """Start waiting for C{count} new pods (replacing earlier expectations)."""
        self._expected[key] = _Expected(count, 0, self._clock.seconds())

    def expect_deletions(self, key, pod_keys):
        """Start waiting for the deletion of the pods C{pod_keys} (C{namespace/name})."""
        pod_keys = set(pod_keys)
        self._expected[key] = _Expected(0, len(pod_keys), self._clock.seconds(), pod_keys)

    def expect(self, key, count, pod_keys):
        """Start waiting for C{count} new pods and the deletion of C{pod_keys} at once."""
        pod_keys = set(pod_keys)
        self._expected[key] = _Expected(count, len(pod_keys), self._clock.seconds(), pod_keys)

    def creation_observed(self, key):
        """One expected pod was seen (or will never be: its creation failed)."""
        expected = self._expected.get(key)
        if expected is not None:
            expected.add -= 1

    def deletion_observed(self, key, pod_key):
        """The pod C{pod_key} was seen going, or its deletion failed."""
        expected = self._expected.get(key)
        if expected is not None and pod_key in expected.deleting:
            expected.deleting.discard(pod_key)
            expected.delete -= 1

    def forget(self, key):
        """Drop the owner's expectations (the owner is gone)."""
        self._expected.pop(key, None)

    def pending(self, key):
        """C{(creations, deletions)} still awaited for C{key}, for logs and tests."""
        expected = self._expected.get(key)
        return (0, 0) if expected is None else (expected.add, expected.delete)
