# -*- test-case-name: tests.controllers.test_replicaset -*-
"""
Per-key retry delays for syncs that failed for an expected reason (a
refused create, a write conflict): doubling from a base to a bound, and
forgotten once the key syncs cleanly. Such failures are the API's answers,
not bugs, so controllers log them briefly and retry after this delay
instead of raising them to the work queue.
"""


class Backoff:
    """
    @param base: the first delay, in seconds.
    @param maximum: the bound the delay doubles up to.
    """

    def __init__(self, base=0.5, maximum=60.0):
        self._base = base
        self._maximum = maximum
        self._failures = {}

    def failed(self, key):
        """Count a failure of C{key}; returns the delay before its next try."""
        count = self._failures.get(key, 0) + 1
        self._failures[key] = count
        return min(self._base * 2 ** (count - 1), self._maximum)

    def succeeded(self, key):
        self._failures.pop(key, None)
