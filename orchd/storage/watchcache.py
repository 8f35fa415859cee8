# -*- test-case-name: tests.storage.test_watchcache -*-
"""
One in-memory watch cache per resource: current state, recent history, fan-out.

The cache lists its resource once, then follows the store's watch. Every
change is decoded and encoded once, however many clients watch. Clients
(L{CacheWatcher}s) that ask for the same thing -- one namespace, one
selector, one format -- form a group (L{_Group}) that filters and frames
each change once into a log they share, each member with a cursor into it:
a change costs the same for ten thousand like watchers as for one, and a
flush writes each member what lies past its cursor in one write, the bytes
joined once for all the members at one cursor (nearly all of them). A
client drains at the pace it reads; one that stops reading is dropped once
it is a bound behind, so it never holds up the others or the server's
memory.

The cache writes no frame itself: each watcher has the encoder of the
format its client negotiated (an L{IWatchEncoder}), which the cache hands
changes, bookmarks and the error that ends a watch. Frames of a change are
kept on the change, by encoder key, so watchers of one format share them.

History keeps each change as a plain tuple of strings, numbers and bytes
(L{CachedEvent.entry}), which the garbage collector stops tracking at its
first pass: at thousands of changes a second (Lease renewals of thousands
of nodes) history held as objects lived just long enough to be walked in
the collector's old generation, again and again. A L{CachedEvent} is made
for a change as it is fanned out, and again for a client that replays it.

In-process followers (informers, through
L{orchd.storage.cachedreads.CachedReads}) take a L{Subscription}: the
changes handed on as they arrive, so a change is read from the store once
per process however many parts of it follow the resource.
"""

from collections import deque

import orjson
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import LoopingCall, deferLater
from twisted.logger import Logger

from orchd.api.errors import StatusError
from orchd.storage.interfaces import (
    ADDED, DELETED, MODIFIED, CompactedError, FutureRevisionError, KeyValue, StoreError,
)

#: Changes kept for clients that resume from a recent resourceVersion.
HISTORY = 10_000
#: Past this many queued bytes a watcher that is not reading is dropped.
MAX_QUEUED_BYTES = 16 * 1024 * 1024
#: Queued frames are written together at most this often per watcher...
FLUSH_INTERVAL = 0.02
#: ...and further apart when many watchers are written to at once: a write
#: to one TLS connection costs about WRITE_COST seconds of the process
#: (most of it after the pass, in the TLS layer), and a pass is spaced to
#: take at most 1/FLUSH_SPACING of the time, up to MAX_FLUSH_INTERVAL.
WRITE_COST = 60e-6
FLUSH_SPACING = 2.0
MAX_FLUSH_INTERVAL = 0.1
#: A round of writes stops for other work after about this many writes,
#: and goes on at the next turn of the reactor.
FLUSH_SLICE = 500
#: Watchers that allow bookmarks get one at least this often.
BOOKMARK_INTERVAL = 55.0
#: How long a read "not older than" a future revision waits for it.
FRESHNESS_WAIT = 3.0
#: The first and the longest wait before listing again after a failed start.
START_RETRY = 1.0
MAX_START_RETRY = 30.0


class CachedEvent:
    """
    A change as the cache keeps it; the object is decoded once, on first need.

    @ivar value: the object's bytes after the change (the last state for DELETED).
    @ivar prev_value: the bytes before a MODIFIED change, else None.
    """

    __slots__ = ("type", "key", "revision", "value", "prev_value", "_obj", "_prev", "frames")

    def __init__(self, type, key, revision, value, prev_value=None):
        self.type = type
        self.key = key
        self.revision = revision
        self.value = value
        self.prev_value = prev_value
        self._obj = None
        self._prev = None
        self.frames = {}

    @property
    def obj(self):
        """The object after the change, with this change's resourceVersion."""
        if self._obj is None:
            self._obj = _decode(self.value, self.revision)
        return self._obj

    @property
    def prev(self):
        """The object before the change, stamped with this change's resourceVersion."""
        if self._prev is None and self.prev_value is not None:
            self._prev = _decode(self.prev_value, self.revision)
        return self._prev

    def entry(self):
        """The change as history keeps it: C{(type, key, revision, value, prev_value)}."""
        return (self.type, self.key, self.revision, self.value, self.prev_value)


def _decode(value, revision):
    obj = orjson.loads(value)
    obj["metadata"]["resourceVersion"] = str(revision)
    return obj


def _frame_of(event, selected, encoder):
    """
    The frame C{event} means for watchers with C{selected} and C{encoder}
    (shared through C{event.frames}), or None when it means nothing to them.
    """
    if event.type == ADDED:
        kind = ADDED if selected(event.obj) else None
    elif event.type == MODIFIED:
        now = selected(event.obj)
        before = event.prev is not None and selected(event.prev)
        # Leaving the selection reads as a deletion, with the old content.
        kind = (MODIFIED if before else ADDED) if now else ("LEFT" if before else None)
    else:
        kind = DELETED if selected(event.obj) else None
    if kind is None:
        return None
    key = (kind, encoder.key)
    frame = event.frames.get(key)
    if frame is None:
        frame = event.frames[key] = encoder.event(
            DELETED if kind == "LEFT" else kind, event.prev if kind == "LEFT" else event.obj)
    return frame


class _Group:
    """
    The watchers of one cache that are sent the same frames: one prefix, one
    selector, one format.

    Each change is filtered and framed once into C{frames}, a log the
    members share; a member's C{cursor} is the position in the log of the
    first frame it has not been given. The log is trimmed to the slowest
    member at each flush.
    """

    __slots__ = ("cache", "key", "prefix", "selected", "encoder", "members",
                 "frames", "revisions", "base", "ends", "total", "last_revision", "_joined",
                 "_round")

    def __init__(self, cache, key, prefix, selected, encoder):
        self.cache = cache
        self.key = key
        self.prefix = prefix
        self.selected = selected
        self.encoder = encoder
        #: Members in the order they joined (a dict as an ordered set).
        self.members = {}
        self.frames = []
        #: The revision of each frame's change.
        self.revisions = []
        #: The log position of C{frames[0]}.
        self.base = 0
        #: C{ends[i]}: the bytes logged up to the end of C{frames[i]},
        #: counted from the first frame ever logged.
        self.ends = []
        self.total = 0
        self.last_revision = 0
        #: The frames past a cursor, joined: C{cursor -> (bytes, count)},
        #: forgotten whenever the log changes.
        self._joined = {}
        #: The members left to write in the round of writes under way.
        self._round = None

    @property
    def end(self):
        """The log position of the next frame."""
        return self.base + len(self.frames)

    def offer(self, event):
        """Log the frame C{event} means for the members, if any."""
        if not event.key.startswith(self.prefix):
            return
        self.last_revision = event.revision
        frame = _frame_of(event, self.selected, self.encoder)
        if frame is not None:
            self.frames.append(frame)
            self.revisions.append(event.revision)
            self.total += len(frame)
            self.ends.append(self.total)
            if self._joined:
                self._joined = {}
            self.cache.schedule_flush(self)

    def since(self, cursor):
        """C{(bytes, count)}: the frames from log position C{cursor} on, joined."""
        if cursor >= self.end:
            return b"", 0
        joined = self._joined.get(cursor)
        if joined is None:
            frames = self.frames[cursor - self.base:]
            joined = self._joined[cursor] = (b"".join(frames), len(frames))
        return joined

    def bytes_since(self, cursor):
        """How many bytes of frames lie from log position C{cursor} on."""
        at = cursor - self.base
        if at >= len(self.frames):
            return 0
        return self.total - (self.ends[at - 1] if at else self.ends[0] - len(self.frames[0]))

    def flush(self):
        """
        Write each member what it has not been given; drop the members that
        cannot take it and are too far behind. Returns the writes made.
        """
        return self.write_some(float("inf"))[0]

    def write_some(self, budget):
        """
        Go on with the round of writes to the members (starting one if none
        is under way) for at most about C{budget} writes: C{(writes made,
        whether the round is over)}. A round of many members is so spread
        over several turns of the reactor, with requests served between.
        """
        if self._round is None:
            self._round = iter(list(self.members))
        writes = 0
        for member in self._round:
            if member.stopped or (member.cursor >= self.end and not member.queue
                                  and member._pending_snapshot is None):
                continue
            if member.paused or member._pending_snapshot is not None:
                # It writes when it can (resumed, or its initial events
                # produced), unless it is too far behind by then.
                if self.bytes_since(member.cursor) + member.queued_bytes > MAX_QUEUED_BYTES:
                    self.cache.drop(member, "the client is not reading its watch fast enough")
                continue
            writes += member.flush()
            if writes >= budget:
                return writes, False
        self._round = None
        self.trim()
        return writes, True

    def trim(self):
        """Forget the frames every member has been given."""
        low = min((member.cursor for member in self.members), default=self.end)
        drop = low - self.base
        if drop > 0:
            del self.frames[:drop]
            del self.revisions[:drop]
            del self.ends[:drop]
            self.base = low
            self._joined = {}


class CacheWatcher:
    """
    One client's view of a cache: its filter, its start, and its queue.

    Changes reach it through its L{_Group}'s shared log; its own queue
    holds what is its alone, in order before the log's frames from its
    cursor on: the history it resumed from, its initial events, bookmarks
    and the ending error.

    @param prefix: only keys under it (a namespace) are delivered.
    @param selected: C{selected(obj) -> bool}, the client's selectors; its
        C{key} attribute, when it has one, is equal for selectors that select
        the same objects (so that their watchers share a group).
    @param encoder: the L{IWatchEncoder} of the client's format; frames of
        one change are shared between watchers through C{encoder.key}.
    @param sink: what frames are written to: C{write(bytes, frames)},
        C{finish()} and C{drop(reason)}.
    """

    __slots__ = ("cache", "prefix", "selected", "encoder", "sink", "after", "queue", "later",
                 "queued_bytes", "paused", "stopped", "bookmarks", "_pending_snapshot",
                 "_last_revision", "group", "cursor", "_ahead")

    def __init__(self, cache, prefix, selected, encoder, sink, after, bookmarks):
        self.cache = cache
        self.prefix = prefix
        self.selected = selected
        self.encoder = encoder
        self.sink = sink
        self.after = after
        self.bookmarks = bookmarks
        self.queue = deque()
        self.later = []
        self.queued_bytes = 0
        self.paused = False
        self.stopped = False
        self._pending_snapshot = None
        self._last_revision = after
        self.group = None
        self.cursor = 0
        #: Set while the watcher starts past the changes its group has
        #: logged: the log's frames up to C{after} are not for it.
        self._ahead = False

    @property
    def last_revision(self):
        """The revision of the latest change this watcher has been offered."""
        group = self.group
        if group is not None and group.last_revision > self._last_revision:
            return group.last_revision
        return self._last_revision

    def group_key(self):
        """What watchers sent the same frames as this one have equal."""
        return (self.prefix, getattr(self.selected, "key", self.selected), self.encoder.key)

    # -- what to send -------------------------------------------------------

    def offer(self, event):
        """Queue the frame C{event} means for this watcher alone, if any (history)."""
        if event.revision <= self.after or not event.key.startswith(self.prefix):
            return
        self._last_revision = max(self._last_revision, event.revision)
        frame = _frame_of(event, self.selected, self.encoder)
        if frame is not None:
            self._push(frame)

    def send_initial(self, snapshot, revision, end_bookmark):
        """Queue ADDED for every selected object of C{snapshot}, lazily, then maybe a bookmark."""
        self._pending_snapshot = (iter(snapshot), revision, end_bookmark)
        self.after = max(self.after, revision)
        self._last_revision = max(self._last_revision, revision)
        self.cache.schedule_flush(self)

    def send_bookmark(self):
        """Queue a BOOKMARK at the latest revision this watcher has been given."""
        self._push(self.encoder.bookmark(max(self.cache.revision, self.after)))

    def send_error(self, error):
        """Queue the ERROR event of C{error}, a L{StoreError} that ends this watch."""
        self._push(self.encoder.error(error))

    def _push(self, frame):
        if self.stopped:
            return
        # Changes that happen while initial events are still being produced
        # wait behind them.
        target = self.later if self._pending_snapshot is not None else self.queue
        group = self.group
        if self._ahead:
            self._skip_to_start()
        if group is not None and self.cursor < group.end:
            # The log's frames up to now come before this one.
            self.queued_bytes += group.bytes_since(self.cursor)
            target.extend(group.frames[self.cursor - group.base:])
            self.cursor = group.end
        target.append(frame)
        self.queued_bytes += len(frame)
        if self.queued_bytes > MAX_QUEUED_BYTES:
            self.cache.drop(self, "the client is not reading its watch fast enough")
            return
        self.cache.schedule_flush(self)

    # -- writing ------------------------------------------------------------

    def flush(self):
        """
        Write what is queued and what the group logged past the cursor, in
        one write, unless the client's connection is full. Returns the
        writes made (0 or 1).
        """
        if self.stopped or self.paused:
            return 0
        if self._pending_snapshot is not None:
            self._fill_from_snapshot()
        shared, count = b"", 0
        group = self.group
        if self._ahead:
            self._skip_to_start()
        if group is not None and self._pending_snapshot is None and self.cursor < group.end:
            shared, count = group.since(self.cursor)
            self.cursor = group.end
        queue = self.queue
        if queue:
            count += len(queue)
            if shared:
                queue.append(shared)
            data = b"".join(queue)
            queue.clear()
            self.queued_bytes = sum(len(frame) for frame in self.later) if self.later else 0
        else:
            data = shared
        if data:
            self.sink.write(data, count)
        if self._pending_snapshot is not None and not self.paused and not self.stopped:
            self.cache.schedule_flush(self)
        return 1 if data else 0

    def write_some(self, budget):
        """L{flush}, as a round of writes of one: C{(writes made, True)}."""
        return self.flush(), True

    def join(self, group):
        """Take the changes C{group} logs from now on."""
        self.group = group
        self.cursor = group.end
        # A start the cache has not reached (the store's revision is ahead
        # of the cache's when the latest changes are to other resources).
        self._ahead = self.after > self.cache.revision

    def _skip_to_start(self):
        """Step the cursor past the group's frames of changes up to C{after}."""
        group = self.group
        if group is None:
            self._ahead = False
            return
        revisions, base, after = group.revisions, group.base, self.after
        end = group.end
        while self.cursor < end and revisions[self.cursor - base] <= after:
            self.cursor += 1
        if group.last_revision >= after:
            self._ahead = False

    def _fill_from_snapshot(self, budget=256 * 1024):
        """Turn part of the initial snapshot into frames, a bounded amount per turn."""
        items, revision, end_bookmark = self._pending_snapshot
        size = 0
        for kv in items:
            obj = _decode(kv.value, kv.mod_revision)
            if kv.key.startswith(self.prefix) and self.selected(obj):
                frame = self.encoder.event(ADDED, obj)
                self.queue.append(frame)
                size += len(frame)
                if size >= budget:
                    return
        self._pending_snapshot = None
        if end_bookmark:
            self.queue.append(self.encoder.bookmark(revision, initial_events_end=True))
        self.queue.extend(self.later)
        self.later = []

    def pause(self):
        self.paused = True

    def resume(self):
        self.paused = False
        self.flush()

    def stop(self):
        """Release everything this watcher holds."""
        if not self.stopped:
            self.stopped = True
            self.queue.clear()
            self.later = []
            self._pending_snapshot = None
            self.cache.forget(self)


class Subscription:
    """An in-process follower of a L{WatchCache}: see L{WatchCache.subscribe}."""

    log = Logger()

    def __init__(self, cache, prefix, on_events, on_error):
        self.cache = cache
        self.prefix = prefix
        self.on_events = on_events
        self.on_error = on_error

    def offer(self, events):
        matching = [e for e in events if e.key.startswith(self.prefix)]
        if matching:
            try:
                self.on_events(matching)
            except Exception:
                self.log.failure("Follower of {prefix!r} raised", prefix=self.prefix)

    def fail(self, error):
        self.stop()
        try:
            self.on_error(error)
        except Exception:
            self.log.failure("Follower of {prefix!r} raised on error", prefix=self.prefix)

    def stop(self):
        self.cache.subscriptions.discard(self)


class WatchCache:
    """
    The cache of one resource (one storage prefix).

    @param store: the L{orchd.storage.interfaces.IStore}.
    @param prefix: the resource's key prefix.
    @param clock: an C{IReactorTime}.
    """

    log = Logger()

    def __init__(self, store, prefix, clock, history=None, flush_interval=FLUSH_INTERVAL):
        self.store = store
        self.prefix = prefix
        self.clock = clock
        self.state = {}
        self.revision = 0
        self.history = deque(maxlen=history or HISTORY)
        self.oldest = 0
        self.watchers = set()
        #: The L{_Group}s of the watchers, by L{CacheWatcher.group_key}.
        self.groups = {}
        self.subscriptions = set()
        self.ready = Deferred()
        self._awaiting_follow = []
        self._subscription = None
        self._base_interval = self._flush_interval = flush_interval
        self._dirty = set()
        #: The writers left in the round of writes under way, and its writes.
        self._round = []
        self._round_writes = 0
        self._flush_call = None
        self._last_flush = -1.0
        self._stopped = False
        self._restart_call = None
        self._bookmarks = LoopingCall(self._send_bookmarks)
        self._bookmarks.clock = clock

    # -- following the store ------------------------------------------------

    async def start(self):
        """List the resource, then follow the store from that revision."""
        page = await self.store.list(self.prefix)
        # Plain tuples of bytes and ints, which the garbage collector stops
        # tracking: the state of a large resource costs no collection time.
        self.state = {kv.key: (kv.value, kv.create_revision, kv.mod_revision)
                      for kv in page.items}
        self.revision = self.oldest = page.revision
        self.history.clear()
        self._subscription = await self.store.watch(
            self.prefix, page.revision, self._apply, self._failed)
        if not self._bookmarks.running:
            self._bookmarks.start(BOOKMARK_INTERVAL, now=False)
        if not self.ready.called:
            self.ready.callback(self)
        awaiting, self._awaiting_follow = self._awaiting_follow, []
        for d in awaiting:
            d.callback(self)

    def following(self):
        """A Deferred firing once the cache follows the store (at once if it does)."""
        if self._subscription is not None:
            return succeed(self)
        d = Deferred()
        self._awaiting_follow.append(d)
        return d

    async def fresh(self, revision, timeout=FRESHNESS_WAIT):
        """
        Wait until the cache has seen every change up to C{revision}.

        The store delivers a change to its watches before it reports the
        change's revision as current, so the store's current revision is
        one the cache has caught up with.

        @raise FutureRevisionError: still behind after C{timeout} seconds.
        """
        deadline = self.clock.seconds() + timeout
        while True:
            current = await self.store.current_revision()
            self.revision = max(self.revision, current)
            if self.revision >= revision:
                return self.revision
            if self.clock.seconds() >= deadline:
                raise FutureRevisionError(revision, self.revision)
            await deferLater(self.clock, 0.1, lambda: None)

    def _send_bookmarks(self):
        for watcher in list(self.watchers):
            if watcher.bookmarks:
                watcher.send_bookmark()

    def restart(self, delay=0.0):
        """
        Start again after C{delay} seconds (at once for 0), and keep trying,
        each wait twice the last up to L{MAX_START_RETRY}, while listing
        fails: the store is unreachable, or holds a value it cannot decrypt.
        The resource's watches and cached lists wait meanwhile; other
        resources serve on.
        """
        if self._stopped or self._restart_call is not None:
            return
        following = min(max(delay * 2, START_RETRY), MAX_START_RETRY)
        if delay <= 0:
            self._attempt_start(following)
        else:
            self._restart_call = self.clock.callLater(delay, self._attempt_start, following)

    def _attempt_start(self, next_delay):
        self._restart_call = None
        if self._stopped:
            return
        d = Deferred.fromCoroutine(self.start())
        d.addErrback(self.start_failed, next_delay)

    def start_failed(self, failure, delay=START_RETRY):
        """Log why L{start} failed, and L{restart} after C{delay} seconds."""
        if self._stopped:
            return
        if failure.check(StatusError, StoreError):
            self.log.error("Watch cache of {prefix} cannot list the store ({error}); trying "
                           "again in {delay}s", prefix=self.prefix, error=failure.value,
                           delay=delay)
        else:
            self.log.failure("Watch cache of {prefix} failed to start; trying again in {delay}s",
                             failure, prefix=self.prefix, delay=delay)
        self.restart(delay)

    def stop(self):
        self._stopped = True
        if self._restart_call is not None:
            self._restart_call.cancel()
            self._restart_call = None
        if self._bookmarks.running:
            self._bookmarks.stop()
        if self._subscription is not None:
            self._subscription.stop()
            self._subscription = None
        for watcher in list(self.watchers):
            self.drop(watcher, "the server is shutting down")
        self.subscriptions.clear()
        if self._flush_call is not None and self._flush_call.active():
            self._flush_call.cancel()

    def _apply(self, events):
        applied = []
        for event in events:
            if event.revision <= self.revision:
                continue
            value, prev_value = event.value, event.prev_value
            held = self.state.get(event.key)
            if held is not None:
                # The store's copy of the key's last state is the very bytes
                # the cache holds (and history may too): keep one of them.
                if prev_value is not None and prev_value == held[0]:
                    prev_value = held[0]
                elif event.type == DELETED and value == held[0]:
                    value = held[0]
            cached = CachedEvent(event.type, event.key, event.revision, value, prev_value)
            if event.type == DELETED:
                self.state.pop(event.key, None)
            else:
                self.state[event.key] = (event.value, event.create_revision, event.revision)
            if len(self.history) == self.history.maxlen:
                self.oldest = self.history[0][2]
            self.history.append(cached.entry())
            self.revision = event.revision
            for group in list(self.groups.values()):
                group.offer(cached)
            applied.append(cached)
        # The followers share the objects the watchers decoded (an informer
        # with a keep function reads the event's object instead of decoding
        # its own); history keeps none of them.
        for subscription in list(self.subscriptions):
            subscription.offer(applied)

    def _failed(self, error):
        """The store's watch ended: every client must list again."""
        self._subscription = None
        if self._stopped:
            return
        self.log.warn("Watch cache of {prefix} lost the store's watch ({error}); resyncing",
                      prefix=self.prefix, error=error)
        for watcher in list(self.watchers):
            self.expire(watcher, watcher.last_revision)
        for subscription in list(self.subscriptions):
            subscription.fail(error)
        self.restart()

    # -- serving ------------------------------------------------------------

    def snapshot(self):
        """The current objects (KeyValues, key order) and the revision they are at."""
        state = self.state
        return [KeyValue(key, *state[key]) for key in sorted(state)], self.revision

    def get(self, key):
        """
        The cached KeyValue of C{key}; None when absent, and also while the
        cache is not following the store (before start, during a resync).
        """
        entry = self.state.get(key) if self._subscription is not None else None
        return KeyValue(key, *entry) if entry is not None else None

    def count(self, prefix, start):
        """How many current keys under C{prefix} sort at or after C{start}."""
        return sum(1 for key in self.state if key >= start and key.startswith(prefix))

    def can_resume(self, revision):
        """True when history holds every change after C{revision}."""
        return revision >= self.oldest

    def add_watcher(self, watcher):
        """
        Register C{watcher} in its group and queue the history it missed
        since C{watcher.after}; the group gives it every change after the
        cache's revision.
        """
        self.watchers.add(watcher)
        key = watcher.group_key()
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group(self, key, watcher.prefix, watcher.selected,
                                              watcher.encoder)
        group.members[watcher] = None
        watcher.join(group)
        after = watcher.after
        for entry in self.history:
            if entry[2] > after:
                watcher.offer(CachedEvent(*entry))

    def subscribe(self, prefix, after, on_events, on_error):
        """
        Hand every change under C{prefix} after revision C{after} to
        C{on_events} (history first, then as changes arrive), and
        C{on_error(error)} once if the cache loses the store, as a store
        watch would. The events are L{CachedEvent}s: C{type}, C{key},
        C{value}, C{revision}, C{prev_value}.

        @raise CompactedError: C{after} is older than the history kept.
        """
        if not self.can_resume(after):
            raise CompactedError(after, self.oldest)
        subscription = Subscription(self, prefix, on_events, on_error)
        self.subscriptions.add(subscription)
        subscription.offer([CachedEvent(*entry) for entry in self.history if entry[2] > after])
        return subscription

    def forget(self, watcher):
        self.watchers.discard(watcher)
        self._dirty.discard(watcher)
        group = watcher.group
        if group is not None:
            watcher.group = None
            group.members.pop(watcher, None)
            if not group.members:
                self._dirty.discard(group)
                if self.groups.get(group.key) is group:
                    del self.groups[group.key]

    def drop(self, watcher, reason):
        """End a watcher's stream at once (slow reader, shutdown)."""
        if not watcher.stopped:
            watcher.stop()
            watcher.sink.drop(reason)

    def expire(self, watcher, requested):
        """
        End a watcher with the ERROR event clients answer by listing again:
        the changes after C{requested} are no longer all kept.
        """
        watcher.send_error(CompactedError(requested, self.oldest))
        watcher.flush()
        watcher.stop()
        watcher.sink.finish()

    def schedule_flush(self, writer):
        """
        Write the frames of C{writer} (a watcher, or a group for all its
        members) soon, coalescing bursts into one write per watcher.
        """
        self._dirty.add(writer)
        if self._flush_call is not None and self._flush_call.active():
            return
        now = self.clock.seconds()
        delay = max(0.0, self._last_flush + self._flush_interval - now)
        self._flush_call = self.clock.callLater(delay, self._flush)

    def _flush(self):
        """
        Go on with the round of writes under way, or start one with the
        writers that have frames; a round of more than L{FLUSH_SLICE} writes
        goes on at the next turn of the reactor.
        """
        self._flush_call = None
        if not self._round:
            self._last_flush = self.clock.seconds()
            self._round, self._dirty = list(self._dirty), set()
            self._round_writes = 0
        todo = self._round
        budget = FLUSH_SLICE
        while todo and budget > 0:
            writes, over = todo[-1].write_some(budget)
            budget -= writes
            self._round_writes += writes
            if over:
                todo.pop()
        # A write may have scheduled a flush meanwhile (a watcher's next
        # initial events): it is the one to move.
        call = self._flush_call
        if todo:
            if call is None:
                self._flush_call = self.clock.callLater(0, self._flush)
            else:
                call.reset(0)
            return
        cost = self._round_writes * WRITE_COST * FLUSH_SPACING
        self._flush_interval = min(MAX_FLUSH_INTERVAL, max(self._base_interval, cost))
        if self._dirty:
            delay = max(0.0, self._last_flush + self._flush_interval - self.clock.seconds())
            if call is None:
                self._flush_call = self.clock.callLater(delay, self._flush)
            else:
                call.reset(delay)
