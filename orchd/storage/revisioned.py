# -*- test-case-name: tests.storage.test_contract -*-
"""
What every revisioned backend shares: write decisions, history rules, watch fan-out.

A backend keeps the current value of each key plus a log of L{Change}s, one
per revision. The log answers three questions the same way in every backend:
what a watch from an old revision must see (replay), what a key looked like
at an older revision (undo the changes made since), and which changes a
compaction may forget (L{garbage}). Backends differ only in where the
current values and the log live and when a write counts as durable.
"""

from collections import deque
from itertools import islice

from twisted.internet import defer
from twisted.logger import Logger
from zope.interface import implementer

from orchd.storage.interfaces import (
    ADDED,
    DELETED,
    MODIFIED,
    CompactedError,
    ConflictError,
    Event,
    FutureRevisionError,
    IStoreWatch,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    StoreUnavailableError,
)


class Change:
    """
    One logged write, with enough to replay it as an L{Event} and to undo it.

    The log keeps the value each put wrote and, for a delete, the value it
    removed; the value before an update is found at C{prev_mod_revision},
    so no value is stored twice.

    @ivar prev_mod_revision: the key's previous write (0 for a create).
    """

    __slots__ = ("revision", "type", "key", "value", "create_revision", "prev_mod_revision")

    def __init__(self, revision, type, key, value, create_revision, prev_mod_revision):
        self.revision = revision
        self.type = type
        self.key = key
        self.value = value
        self.create_revision = create_revision
        self.prev_mod_revision = prev_mod_revision


def refusal(kind, key, current, expected_revision):
    """
    The sentinel error a write of C{kind} must fail with, or None if it may go on.

    @param current: the key's current L{KeyValue}, pending writes included.
    """
    if kind == ADDED:
        return KeyExistsError(key) if current is not None else None
    if current is None:
        return KeyNotFoundError(key)
    if expected_revision is not None and current.mod_revision != expected_revision:
        return ConflictError(key, current)
    return None


def value_before(change, value_at):
    """The value a key had just before C{change}; C{value_at(revision)} reads the log."""
    if change.type == MODIFIED:
        return value_at(change.prev_mod_revision)
    if change.type == DELETED:
        return change.value
    return None


def state_before(change, value_at):
    """The L{KeyValue} of C{change.key} just before C{change}, or None if absent."""
    if change.type == ADDED:
        return None
    return KeyValue(
        change.key, value_before(change, value_at), change.create_revision, change.prev_mod_revision
    )


def change_event(change, value_at):
    """The L{Event} a watch sees for a logged C{change}."""
    prev = value_at(change.prev_mod_revision) if change.type == MODIFIED else None
    return Event(change.type, change.key, change.value, change.revision, change.create_revision, prev)


def old_states(changes, value_at):
    """
    Map each key of C{changes} (ascending, all after some revision r) to its
    L{KeyValue} at r, or None where it did not exist.

    The earliest change after r decides: undoing it gives the state at r.
    """
    first = {}
    for change in changes:
        first.setdefault(change.key, change)
    return {key: state_before(change, value_at) for key, change in first.items()}


def garbage(change):
    """
    The revisions a compaction at or above C{change.revision} may forget because of it.

    Like etcd, the log keeps each key's latest put at or below the horizon,
    so that any state from the horizon on can still be rebuilt: a change
    makes the key's previous put garbage, and a delete is garbage itself
    (it carries the value it removed, and nothing older needs it).
    Processing every change at most once, in revision order, is enough.
    """
    if change.type == ADDED:
        return ()
    if change.type == DELETED:
        return (change.prev_mod_revision, change.revision)
    return (change.prev_mod_revision,)


def merge_at(current, overrides):
    """
    Apply C{overrides} (key -> item, or None for absent) to the key-ordered
    C{(key, item)} pairs of C{current}, yielding the pairs of the old state.
    """
    if not overrides:
        yield from current
        return
    pending = sorted(overrides.items())
    i, n = 0, len(pending)
    for key, item in current:
        while i < n and pending[i][0] < key:
            if pending[i][1] is not None:
                yield pending[i]
            i += 1
        if i < n and pending[i][0] == key:
            if pending[i][1] is not None:
                yield pending[i]
            i += 1
        else:
            yield key, item
    for pair in pending[i:]:
        if pair[1] is not None:
            yield pair


def read_page(scan, overrides, limit, count_remaining, decode):
    """
    One page of a listing: C{(items, more, remaining)}.

    @param scan: C{scan(first_key, values)} iterates the current keys of the
        listing from C{first_key} (None: the listing's start), as
        C{(key, item)} pairs when C{values} else as bare keys. Counting the
        rest of the listing runs a keys-only scan so no value is copied.
    @param overrides: key -> state at the listing's revision, for keys
        changed since (see L{merge_at}); empty for the latest revision.
    @param decode: C{decode(key, item)} makes the L{KeyValue} of a scanned
        item; items coming from C{overrides} are used as they are.
    """
    entries = scan(None, True)
    decode_item = decode
    if overrides:
        entries = merge_at(entries, overrides)

        def decode_item(key, item):
            return item if type(item) is KeyValue else decode(key, item)

    if limit:
        page = list(islice(entries, limit))
        following = next(entries, None)
        next_key = None if following is None else following[0]
    else:
        page, next_key = entries, None
    items = [decode_item(key, item) for key, item in page]
    remaining = None
    if count_remaining:
        remaining = 0
        if next_key is not None:
            keys = scan(next_key, False)
            if overrides:
                later = {key: state for key, state in overrides.items() if key >= next_key}
                keys = merge_at(((key, True) for key in keys), later)
            remaining = sum(1 for _ in keys)
    return items, next_key is not None, remaining


@implementer(IStoreWatch)
class _Watch:
    """One registered watch; C{position} is the last revision it has been given."""

    __slots__ = ("prefix", "position", "on_events", "on_error", "active", "pending", "_hub")

    def __init__(self, hub, prefix, position, on_events, on_error):
        self._hub = hub
        self.prefix = prefix
        self.position = position
        self.on_events = on_events
        self.on_error = on_error
        self.active = True
        self.pending = None

    def stop(self):
        self._hub.forget(self)


class WatchHub:
    """
    Watch registry and fan-out: replays history from the log, then goes live.

    A new watch first reads the log from its start revision up to the
    committed revision, in chunks; live batches skip it meanwhile, since
    whatever they carry is in the log by then. Once caught up (a check made
    on the same thread that publishes) it joins the live watches, so no
    event is missed or repeated. With a C{clock}, each replay chunk after
    the first runs in a later reactor turn so a long replay never blocks;
    without one, replay finishes before L{watch} returns.

    @param read_events: C{read_events(prefix, after, upto, limit)} returns
        C{(events, last)}: the L{Event}s under C{prefix} among the first
        C{limit} revisions in C{(after, upto]}, and the last revision read.
    @param committed: returns the latest revision whose events were published.
    @param compacted: returns the compaction horizon.
    """

    log = Logger()

    def __init__(self, read_events, committed, compacted, clock=None, replay_chunk=1000):
        self._read_events = read_events
        self._committed = committed
        self._compacted = compacted
        self._clock = clock
        self._replay_chunk = replay_chunk
        self._live = {}
        #: The live watches whose prefix does not end at a "/" (or is empty),
        #: which a key's prefixes cannot name: the same lists as in C{_live}.
        self._partial = {}
        self._replaying = set()
        self._queue = deque()
        self._publishing = False

    def watch(self, prefix, after, on_events, on_error):
        """Register a watch for changes under C{prefix} after revision C{after}."""
        watch = _Watch(self, prefix, after, on_events, on_error)
        self._replaying.add(watch)
        self._replay(watch)
        return watch

    def _replay(self, watch):
        watch.pending = None
        while watch.active:
            compacted = self._compacted()
            if watch.position < compacted:
                self._end(watch, CompactedError(watch.position, compacted))
                return
            if watch.position >= self._committed():
                self._replaying.discard(watch)
                watches = self._live.get(watch.prefix)
                if watches is None:
                    watches = self._live[watch.prefix] = []
                    if watch.prefix[-1:] != "/":
                        self._partial[watch.prefix] = watches
                watches.append(watch)
                return
            try:
                events, watch.position = self._read_events(
                    watch.prefix, watch.position, self._committed(), self._replay_chunk
                )
            except Exception as error:
                self.log.failure("Replaying history for prefix {prefix!r} failed", prefix=watch.prefix)
                self._end(watch, StoreUnavailableError(f"reading history failed: {error}"))
                return
            if events:
                self._deliver(watch, events)
            if self._clock is not None and watch.active and watch.position < self._committed():
                watch.pending = self._clock.callLater(0, self._replay, watch)
                return

    def publish(self, events):
        """
        Deliver a committed batch (ascending revisions) to live watches.

        A callback may write again; that batch is queued and delivered after
        this one, so every watch still sees revision order.
        """
        if not self._live:
            return
        self._queue.append(events)
        if self._publishing:
            return
        self._publishing = True
        try:
            while self._queue:
                self._fan_out(self._queue.popleft())
        finally:
            self._publishing = False

    def _fan_out(self, batch):
        live = self._live
        # Watched prefixes are mostly a resource's or a namespace's, ending
        # at a "/": each key is looked up by the prefixes it has, rather
        # than every watched prefix (one per stored resource) tested
        # against every key.
        by_prefix = {}
        for event in batch:
            key = event.key
            end = key.find("/")
            while end >= 0:
                prefix = key[:end + 1]
                if prefix in live:
                    matched = by_prefix.get(prefix)
                    if matched is None:
                        by_prefix[prefix] = [event]
                    else:
                        matched.append(event)
                end = key.find("/", end + 1)
        for prefix, watches in list(self._partial.items()):
            matching = [e for e in batch if e.key.startswith(prefix)] if prefix else batch
            if matching:
                by_prefix[prefix] = matching
        for prefix, matching in by_prefix.items():
            watches = live.get(prefix)
            if not watches:
                continue
            last = matching[-1].revision
            for watch in list(watches):
                if not watch.active or watch.position >= last:
                    continue
                fresh = [e for e in matching if e.revision > watch.position]
                watch.position = last
                self._deliver(watch, fresh)

    def _deliver(self, watch, events):
        try:
            watch.on_events(events)
        except Exception:
            # One consumer's bug must not starve the others of events.
            self.log.failure("Watch callback for prefix {prefix!r} raised", prefix=watch.prefix)

    def forget(self, watch):
        """Stop delivering to C{watch} and drop every reference to it."""
        if not watch.active:
            return
        watch.active = False
        if watch.pending is not None:
            watch.pending.cancel()
            watch.pending = None
        self._replaying.discard(watch)
        watches = self._live.get(watch.prefix)
        if watches is not None and watch in watches:
            watches.remove(watch)
            if not watches:
                del self._live[watch.prefix]
                self._partial.pop(watch.prefix, None)

    def _end(self, watch, error):
        self.forget(watch)
        try:
            watch.on_error(error)
        except Exception:
            self.log.failure("Watch error callback for prefix {prefix!r} raised", prefix=watch.prefix)

    def close(self, error):
        """End every watch with C{error}."""
        watches = list(self._replaying)
        for group in self._live.values():
            watches.extend(group)
        for watch in watches:
            self._end(watch, error)


class RevisionedStore:
    """
    The part of L{IStore} that is the same in every backend.

    A subclass keeps C{_revision} (the last revision handed out),
    C{_committed} (the last durable one, whose events were published) and
    C{compacted_revision}, and provides C{_current(key)} (pending writes
    included), C{_commit(change, event, result)}, C{_read_events} (see
    L{WatchHub}) and C{_compact()}.
    """

    log = Logger()

    def __init__(self, revision, compacted, clock=None, replay_chunk=1000):
        self._revision = revision
        self._committed = revision
        self.compacted_revision = compacted
        self._accepting = True
        self._hub = WatchHub(
            self._read_events,
            lambda: self._committed,
            lambda: self.compacted_revision,
            clock,
            replay_chunk,
        )

    def _unavailable(self):
        return defer.fail(StoreUnavailableError("the store is closed"))

    def create(self, key, value):
        return self._write(ADDED, key, value, None)

    def update(self, key, value, expected_revision):
        return self._write(MODIFIED, key, value, expected_revision)

    def delete(self, key, expected_revision=None):
        return self._write(DELETED, key, None, expected_revision)

    def _write(self, kind, key, value, expected_revision):
        """Decide a write against the current state, give it a revision, commit it."""
        if not self._accepting:
            return self._unavailable()
        # Checked before a revision is taken: a write that fails after that
        # would leave a hole in the log, which replay and undo rely on not having.
        if not isinstance(key, str) or (kind != DELETED and not isinstance(value, bytes)):
            return defer.fail(TypeError(f"keys are str and values bytes, not {key!r}, {type(value)}"))
        try:
            current = self._current(key)
        except Exception:
            return defer.fail()
        error = refusal(kind, key, current, expected_revision)
        if error is not None:
            return defer.fail(error)
        self._revision = revision = self._revision + 1
        if kind == ADDED:
            change = Change(revision, kind, key, value, revision, 0)
            event = Event(kind, key, value, revision, revision)
            result = KeyValue(key, value, revision, revision)
        elif kind == MODIFIED:
            create = current.create_revision
            change = Change(revision, kind, key, value, create, current.mod_revision)
            event = Event(kind, key, value, revision, create, current.value)
            result = KeyValue(key, value, create, revision)
        else:
            create = current.create_revision
            change = Change(revision, kind, key, current.value, create, current.mod_revision)
            event = Event(kind, key, current.value, revision, create)
            result = (revision, current)
        return self._commit(change, event, result)

    def watch(self, prefix, after_revision, on_events, on_error):
        if not self._accepting:
            return self._unavailable()
        if after_revision and after_revision < self.compacted_revision:
            return defer.fail(CompactedError(after_revision, self.compacted_revision))
        return defer.succeed(
            self._hub.watch(prefix, after_revision or self._committed, on_events, on_error)
        )

    def current_revision(self):
        return defer.succeed(self._committed)

    def compact(self, revision):
        """
        Move the horizon (refused for a revision not yet committed), then let
        the backend forget the garbage below it. Readers check the horizon
        before reading, so raising it first keeps them off forgotten data.
        """
        if not self._accepting:
            return self._unavailable()
        if revision > self._committed:
            return defer.fail(FutureRevisionError(revision, self._committed))
        if revision > self.compacted_revision:
            self.compacted_revision = revision
        return self._compact()

    def _check_revision(self, revision, latest):
        """The error a read at C{revision} must fail with, when C{latest} is the newest."""
        if revision < self.compacted_revision:
            return CompactedError(revision, self.compacted_revision)
        if revision > latest:
            return FutureRevisionError(revision, latest)
        return None
