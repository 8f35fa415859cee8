# -*- test-case-name: tests.auth.test_authz_webhook -*-
"""
A bounded map whose entries expire: remembered answers of remote checks
(webhook authorization, the orchlet's TokenReviews and SubjectAccessReviews).
"""

import collections

#: The most entries an L{ExpiringCache} keeps by default.
CACHE_SIZE = 8192


class ExpiringCache:
    """
    A least-recently-used map whose entries also expire.

    @param clock: an C{IReactorTime}; only C{seconds()} is used.
    @param size: the most entries kept; the least recently used go first.
    """

    def __init__(self, clock, size=CACHE_SIZE):
        self._clock = clock
        self._size = size
        self._entries = collections.OrderedDict()

    def __len__(self):
        return len(self._entries)

    def get(self, key):
        """The live value for C{key}, or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self._clock.seconds() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key, value, ttl):
        if ttl <= 0:
            return
        self._entries[key] = (self._clock.seconds() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
