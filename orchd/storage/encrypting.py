# -*- test-case-name: tests.storage.test_encrypting -*-
"""
Encryption at rest: an L{IStore} decorator that transforms values on the way
in and out of the backend.

Writes are encrypted with the first provider of the rule that covers the
key's resource; gets, lists, watch events and conflict reports are
decrypted, so everything above (watch caches, informers, the registry)
sees plaintext, and the backend (LevelDB files, etcd, snapshots made by
C{orchd-admin}, which read the backend itself) sees only ciphertext.

A value that does not decrypt (its key was removed from the
configuration, or the bytes were tampered with) fails the read that
meets it with a 500 naming the storage key, as upstream's
C{unable to transform key}; the rest of the store serves on.
"""

from twisted.internet import defer
from zope.interface import implementer

from orchd.api.errors import StatusError
from orchd.storage.interfaces import (
    ConflictError, Event, IStore, IStoreWatch, KeyValue, ListResult,
)
from orchd.storage.transformers import TransformError

#: Plaintexts remembered by key (see L{TransformingStore._recent}).
RECENT = 4096


class StaleKeyValue(KeyValue):
    """A L{KeyValue} read with other than the writing provider and key."""

    __slots__ = ()
    stale = True


def transform_failed(key, error):
    """The Status of a value at C{key} that cannot be transformed."""
    return StatusError.internal(f'unable to transform key "{key}": {error}')


@implementer(IStoreWatch)
class _TransformingWatch:
    """A backend watch whose events are decrypted; a bad value ends it."""

    def __init__(self, transform, on_events, on_error):
        self._transform = transform
        self._on_events = on_events
        self._on_error = on_error
        self.inner = None
        self.ended = False

    def deliver(self, events):
        if self.ended:
            return
        try:
            plain = [self._transform(event) for event in events]
        except StatusError as error:
            self.ended = True
            self.stop()
            self._on_error(error)
            return
        self._on_events(plain)

    def failed(self, error):
        if not self.ended:
            self.ended = True
            self._on_error(error)

    def stop(self):
        self.ended = True
        if self.inner is not None:
            self.inner.stop()


@implementer(IStore)
class TransformingStore:
    """
    @param store: the backend L{IStore}.
    @param transformer_for: C{transformer_for(key)} returns the
        L{orchd.storage.transformers.PrefixTransformers} of the key's
        resource, or None to keep its values as they are.
    """

    def __init__(self, store, transformer_for):
        self.store = store
        self._transformer_for = transformer_for
        #: key -> the plaintext KeyValue last read or written there. A key's
        #: revision names its value, so a hit needs no decryption: a GET of
        #: an object read before costs a dictionary lookup.
        self._recent = {}

    @property
    def compacted_revision(self):
        return self.store.compacted_revision

    # -- the value path -------------------------------------------------------

    def _encrypt(self, key, value):
        transformer = self._transformer_for(key)
        if transformer is None:
            return value
        try:
            return transformer.to_storage(value, key)
        except TransformError as error:
            raise transform_failed(key, error) from None

    @staticmethod
    def _plain(transformer, key, value):
        """C{(plaintext, stale)} of a stored value."""
        try:
            return transformer.from_storage(value, key)
        except TransformError as error:
            raise transform_failed(key, error) from None

    def _decrypt(self, kv):
        if kv is None:
            return None
        recent = self._recent.get(kv.key)
        if recent is not None and recent.mod_revision == kv.mod_revision:
            return recent
        transformer = self._transformer_for(kv.key)
        if transformer is None:
            return kv
        plain, stale = self._plain(transformer, kv.key, kv.value)
        if stale:
            return StaleKeyValue(kv.key, plain, kv.create_revision, kv.mod_revision)
        if plain is kv.value:
            return kv
        return self._remember(KeyValue(kv.key, plain, kv.create_revision, kv.mod_revision))

    def _remember(self, kv):
        recent = self._recent
        if len(recent) >= RECENT and kv.key not in recent:
            del recent[next(iter(recent))]     # the oldest remembered
        recent[kv.key] = kv
        return kv

    def _decrypt_event(self, event):
        key = event.key
        transformer = self._transformer_for(key)
        if transformer is None:
            return event
        value = self._plain(transformer, key, event.value)[0]
        prev = event.prev_value
        if prev is not None:
            prev = self._plain(transformer, key, prev)[0]
        if value is event.value and prev is event.prev_value:
            return event
        return Event(event.type, key, value, event.revision, event.create_revision, prev)

    # -- IStore -----------------------------------------------------------------

    def get(self, key):
        return self.store.get(key).addCallback(self._decrypt)

    def list(self, prefix, revision=0, start=None, limit=0, count_remaining=False):
        return self.store.list(prefix, revision, start, limit, count_remaining).addCallback(
            self._decrypt_list)

    def _decrypt_list(self, result):
        decrypt = self._decrypt
        return ListResult([decrypt(kv) for kv in result.items], result.revision, result.more,
                          result.remaining)

    def count(self, prefix):
        return self.store.count(prefix)

    def create(self, key, value):
        try:
            stored = self._encrypt(key, value)
        except Exception:
            # StatusError, or the TypeError of a key or value of the wrong type.
            return defer.fail()
        return self.store.create(key, stored).addCallback(self._as_written, value)

    def update(self, key, value, expected_revision):
        try:
            stored = self._encrypt(key, value)
        except Exception:
            # StatusError, or the TypeError of a key or value of the wrong type.
            return defer.fail()
        d = self.store.update(key, stored, expected_revision)
        return d.addCallbacks(self._as_written, self._conflict, (value,))

    def _as_written(self, kv, value):
        # The plaintext is at hand: no need to decrypt what was just encrypted.
        written = KeyValue(kv.key, value, kv.create_revision, kv.mod_revision)
        if self._transformer_for(kv.key) is None:
            return written
        return self._remember(written)

    def _conflict(self, failure):
        if failure.check(ConflictError) and failure.value.current is not None:
            error = failure.value
            try:
                current = self._decrypt(error.current)
            except StatusError:
                return failure
            raise ConflictError(error.key, current) from None
        return failure

    def delete(self, key, expected_revision=None):
        d = self.store.delete(key, expected_revision)
        return d.addCallbacks(self._deleted, self._conflict)

    def _deleted(self, result):
        revision, previous = result
        previous = self._decrypt(previous)
        if previous is not None:
            self._recent.pop(previous.key, None)
        return revision, previous

    def watch(self, prefix, after_revision, on_events, on_error):
        watch = _TransformingWatch(self._decrypt_event, on_events, on_error)
        d = self.store.watch(prefix, after_revision, watch.deliver, watch.failed)

        def started(inner):
            watch.inner = inner
            if watch.ended:
                # A replayed event failed before the watch was handed over.
                inner.stop()
            return watch

        return d.addCallback(started)

    def current_revision(self):
        return self.store.current_revision()

    def compact(self, revision):
        return self.store.compact(revision)

    def check(self):
        return self.store.check()

    def close(self):
        return self.store.close()
