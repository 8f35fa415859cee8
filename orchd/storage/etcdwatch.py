# -*- test-case-name: tests.storage.test_contract -*-
"""
One L{IStore} watch as one etcd watch stream, resumed after a broken stream.

etcd delivers every change in revision order from a start revision; the
watch remembers the last revision it handed on (C{position}) and, when the
stream breaks (a member stopped, a proxy timed out), opens a new one from
C{position + 1} on whichever member answers, skipping anything at or
below C{position}, so no event is lost or repeated. A start revision that
etcd has compacted away ends the watch with L{CompactedError}.

Writers wait on L{EtcdWatch.reached} so that a write through this process
is handed to every live watch of this process before the write returns,
as the store contract asks of every backend.
"""

from twisted.internet import defer
from twisted.logger import Logger
from zope.interface import implementer

from orchd.storage.etcdgateway import LineStream, b64, prefix_end, revision_of, unb64
from orchd.storage.interfaces import (
    ADDED, DELETED, MODIFIED, CompactedError, Event, IStoreWatch, StoreUnavailableError,
)

#: Seconds between attempts to reopen a broken stream, and how long to keep trying.
RETRY_DELAYS = (0, 0.05, 0.1, 0.2, 0.5, 1.0)
GIVE_UP_AFTER = 60


def to_event(message, decode_key):
    """The L{Event} of one etcd watch event (its JSON form)."""
    kv = message.get("kv", {})
    prev = message.get("prev_kv")
    key = decode_key(unb64(kv.get("key")))
    revision = int(kv.get("mod_revision", 0))
    if message.get("type", "PUT") == "DELETE":
        create = int(prev.get("create_revision", 0)) if prev else 0
        value = unb64(prev.get("value")) if prev else b""
        return Event(DELETED, key, value, revision, create)
    value = unb64(kv.get("value"))
    create = int(kv.get("create_revision", 0))
    if create == revision:
        return Event(ADDED, key, value, revision, create)
    return Event(MODIFIED, key, value, revision, create,
                 unb64(prev.get("value")) if prev else None)


@implementer(IStoreWatch)
class EtcdWatch:
    """
    @ivar position: the last revision handed on (or known to be covered).
    @ivar created: True once etcd has confirmed the first stream.
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
        self._stream = None
        self._waiters = []
        self._started = defer.Deferred()
        self._retry = None

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
        """Open the first stream; fires with self once etcd confirms it."""
        defer.Deferred.fromCoroutine(self._run())
        return self._started

    def _request(self):
        key = self.store.encode_key(self.prefix) or b"\x00"
        request = {"key": b64(key), "range_end": b64(prefix_end(self.store.encode_key(self.prefix))),
                   "prev_kv": True}
        if self.position:
            request["start_revision"] = self.position + 1
        return {"create_request": request}

    async def _run(self):
        failures = 0
        clock = self.store.reactor
        began = None
        while self.active:
            stream = self._stream = LineStream(self._message)
            try:
                await self.store.gateway.open_stream("/v3/watch", self._request(), stream)
            except Exception as e:
                self._stream = None
                if not self.created:
                    self._fail(e if isinstance(e, StoreUnavailableError)
                               else StoreUnavailableError(str(e)), start=True)
                    return
                failures += 1
                began = began or clock.seconds()
                if clock.seconds() - began > GIVE_UP_AFTER:
                    self._fail(StoreUnavailableError(f"etcd watch could not resume: {e}"))
                    return
                delay = RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)]
                self._retry = defer.Deferred()
                call = clock.callLater(delay, self._retry.callback, None)
                self._retry.addErrback(lambda f: call.cancel())
                try:
                    await self._retry
                except defer.CancelledError:
                    return
                continue
            if not self.active:
                stream.stop()
                return
            await stream.finished
            self._stream = None
            failures, began = 0, None
            if self.active:
                self.log.info("etcd watch on {prefix!r} broke at revision {position}; resuming",
                              prefix=self.prefix, position=self.position)

    def _message(self, message):
        if not self.active:
            return
        if "error" in message:
            # The stream failed mid-way (e.g. the member lost its leader): resume elsewhere.
            if self._stream is not None:
                self._stream.stop()
            return
        result = message.get("result", {})
        if result.get("created") and not self.created:
            self.created = True
            if not self.position:
                self.position = revision_of(result)
            self._started.callback(self)
        if result.get("canceled"):
            compacted = int(result.get("compact_revision", 0))
            if compacted:
                self.store.saw_compaction(compacted)
                self._fail(CompactedError(self.position, compacted))
            else:
                self._fail(StoreUnavailableError(
                    f"etcd cancelled the watch: {result.get('cancel_reason', '')}"))
            return
        events = [to_event(e, self.store.decode_key) for e in result.get("events", ())]
        events = [e for e in events if e.revision > self.position]
        if not events:
            return
        self.position = events[-1].revision
        try:
            self.on_events(events)
        except Exception:
            self.log.failure("Watch callback for prefix {prefix!r} raised", prefix=self.prefix)
        self._wake()

    def _fail(self, error, start=False):
        if not self.active:
            return
        self._halt()
        if start or not self._started.called:
            self._started.errback(error)
            return
        try:
            self.on_error(error)
        except Exception:
            self.log.failure("Watch error callback for prefix {prefix!r} raised", prefix=self.prefix)

    def _halt(self):
        self.active = False
        self.store.forget(self)
        if self._stream is not None:
            self._stream.stop()
            self._stream = None
        if self._retry is not None and not self._retry.called:
            self._retry.cancel()
        self._wake(everything=True)

    def stop(self):
        if self.active:
            self._halt()

    def end(self, error):
        """End the watch with C{error} through its on_error (the store is closing)."""
        self._fail(error)
