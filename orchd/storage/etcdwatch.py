# -*- test-case-name: tests.storage.test_contract -*-
"""
The store's watches on etcd: one shared Watch stream, resumed after a break.

etcd delivers every change in revision order from a start revision. Each
L{EtcdWatch} remembers the last revision it handed on (C{position}); when
the stream breaks (a member stopped, the network failed), L{WatchMux}
opens a new one on the next member and creates every watch again from its
C{position + 1}, and a watch skips anything at or below its position, so
no event is lost or repeated. A start revision that etcd has compacted
away ends the watch with L{CompactedError}.

Writers wait on L{EtcdWatch.reached} so that a write through this process
is handed to every live watch of this process before the write returns,
as the store contract asks of every backend.
"""

import itertools

from twisted.internet import defer
from twisted.logger import Logger
from zope.interface import implementer

from orchd.storage.etcdgrpc import messages
from orchd.storage.interfaces import (
    ADDED, DELETED, MODIFIED, CompactedError, Event, IStoreWatch, StoreUnavailableError,
)

#: Seconds between attempts to reopen a broken stream, and how long to keep trying.
RETRY_DELAYS = (0, 0.05, 0.1, 0.2, 0.5, 1.0)
GIVE_UP_AFTER = 60
#: etcd's event type for a deletion (0 is a put).
DELETE = 1


def prefix_end(prefix):
    """The C{range_end} that makes a range cover every key starting with C{prefix} (bytes)."""
    chars = bytearray(prefix)
    while chars:
        if chars[-1] < 0xFF:
            chars[-1] += 1
            return bytes(chars)
        chars.pop()
    return b"\x00"


def to_event(message, decode_key):
    """The L{Event} of one etcd watch event."""
    kv = message.kv
    key = decode_key(kv.key)
    revision = kv.mod_revision
    prev = message.prev_kv if message.HasField("prev_kv") else None
    if message.type == DELETE:
        create = prev.create_revision if prev is not None else 0
        return Event(DELETED, key, prev.value if prev is not None else b"", revision, create)
    if kv.create_revision == revision:
        return Event(ADDED, key, kv.value, revision, revision)
    return Event(MODIFIED, key, kv.value, revision, kv.create_revision,
                 prev.value if prev is not None else None)


def _describe(error):
    return str(error) if error is not None else "closed by etcd"


class WatchMux:
    """
    Every watch of one store over one Watch stream (see L{etcdgrpc.WatchStream}).
    """

    log = Logger()

    def __init__(self, store):
        self.store = store
        self.watches = {}
        self._ids = itertools.count(1)
        self._stream = None
        self._failures = 0
        self._began = None
        self._retry = None
        self._closing = False

    def add(self, watch):
        watch.id = next(self._ids)
        self.watches[watch.id] = watch
        if self._retry is None:
            self._open().send(self._create(watch))
        # else: the stream is being reopened, and L{_resume} creates every watch.

    def remove(self, watch):
        if self.watches.pop(watch.id, None) is not None and self._stream is not None:
            request = messages.WatchRequest()
            request.cancel_request.watch_id = watch.id
            self._stream.send(request)

    def _create(self, watch):
        request = messages.WatchRequest()
        create = request.create_request
        key = self.store.encode_key(watch.prefix)
        create.key = key or b"\x00"
        create.range_end = prefix_end(key)
        create.prev_kv = True
        create.watch_id = watch.id
        if watch.position:
            create.start_revision = watch.position + 1
        return request

    def _open(self):
        if self._stream is None:
            self._stream = self.store.client.watch_stream(self._answer, self._ended)
        return self._stream

    def _answer(self, stream, answer):
        if stream is not self._stream:
            return  # still draining a stream left behind
        self._failures, self._began = 0, None
        watch = self.watches.get(answer.watch_id)
        if watch is not None:
            watch.handle(answer)

    def _ended(self, stream, error):
        if stream is not self._stream:
            return
        self._stream = None
        if self._closing or not self.watches:
            return
        self.store.client._next(stream.index)
        clock = self.store.reactor
        self._failures += 1
        self._began = self._began or clock.seconds()
        reason = _describe(error)
        # A watch etcd never confirmed fails once every member was tried.
        unconfirmed = self._failures >= len(self.store.client.endpoints)
        gave_up = clock.seconds() - self._began > GIVE_UP_AFTER
        for watch in list(self.watches.values()):
            if gave_up:
                watch.fail(StoreUnavailableError(f"etcd watch could not resume: {reason}"))
            elif unconfirmed and not watch.created:
                watch.fail(StoreUnavailableError(f"etcd watch at {stream.where}: {reason}"))
        if not self.watches:
            return
        self.log.info("etcd watch stream at {where} ended ({reason}); resuming {count} watches",
                      where=stream.where, reason=reason, count=len(self.watches))
        delay = RETRY_DELAYS[min(self._failures - 1, len(RETRY_DELAYS) - 1)]
        self._retry = clock.callLater(delay, self._resume)

    def _resume(self):
        self._retry = None
        if self._closing or not self.watches:
            return
        stream = self._open()
        for watch in list(self.watches.values()):
            stream.send(self._create(watch))

    async def close(self):
        """Close the stream (the store has ended its watches) and wait for its thread's end."""
        self._closing = True
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
            await stream.ended


@implementer(IStoreWatch)
class EtcdWatch:
    """
    @ivar position: the last revision handed on (or known to be covered).
    @ivar created: True once etcd has confirmed the watch.
    """

    log = Logger()

    def __init__(self, store, prefix, after, on_events, on_error):
        self.store = store
        self.prefix = prefix
        self.after = after
        self.position = after
        self.on_events = on_events
        self.on_error = on_error
        self.active = True
        self.created = False
        self.id = None
        self._waiters = []
        self._started = defer.Deferred()

    def covers(self, key, revision):
        """Whether a write of C{key} at C{revision} is still to reach this watch."""
        if not self.active or not key.startswith(self.prefix) or revision <= self.position:
            return False
        return self.created or self.after > 0

    def reached(self, revision):
        """A Deferred firing once this watch has handed on C{revision} (or ended)."""
        if not self.active or self.position >= revision:
            return defer.succeed(None)
        d = defer.Deferred()
        self._waiters.append((revision, d))
        return d

    def _wake(self, everything=False):
        waiting, self._waiters = self._waiters, []
        for revision, d in waiting:
            if everything or self.position >= revision:
                d.callback(None)
            else:
                self._waiters.append((revision, d))

    def start(self):
        """Ask etcd for the watch; fires with self once etcd confirms it."""
        self.store.mux.add(self)
        return self._started

    def handle(self, answer):
        """One answer of the stream for this watch."""
        if not self.active:
            return
        if answer.created and not self.created:
            self.created = True
            if not self.position:
                self.position = answer.header.revision
            self._started.callback(self)
        if answer.canceled:
            if answer.compact_revision:
                self.store.saw_compaction(answer.compact_revision)
                self.fail(CompactedError(self.position, answer.compact_revision))
            else:
                self.fail(StoreUnavailableError(
                    f"etcd cancelled the watch: {answer.cancel_reason}"))
            return
        position = self.position
        events = [to_event(e, self.store.decode_key) for e in answer.events
                  if e.kv.mod_revision > position]
        if not events:
            return
        self.position = events[-1].revision
        try:
            self.on_events(events)
        except Exception:
            self.log.failure("Watch callback for prefix {prefix!r} raised", prefix=self.prefix)
        self._wake()

    def fail(self, error):
        """End the watch with C{error}: its start fails, or its on_error hears of it."""
        if not self.active:
            return
        self._halt()
        if not self._started.called:
            self._started.errback(error)
            return
        try:
            self.on_error(error)
        except Exception:
            self.log.failure("Watch error callback for prefix {prefix!r} raised",
                             prefix=self.prefix)

    def _halt(self):
        self.active = False
        self.store.forget(self)
        self.store.mux.remove(self)
        self._wake(everything=True)

    def stop(self):
        if self.active:
            self._halt()

    def end(self, error):
        """End the watch with C{error} through its on_error (the store is closing)."""
        self.fail(error)
