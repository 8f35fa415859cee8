"""
The watch cache hands each watcher's encoder what happened and writes no
frame itself; frames of a change are shared by watchers of one format.
"""

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from orchd.storage import watchcache
from orchd.storage.interfaces import (
    ADDED, DELETED, MODIFIED, CompactedError, Event, IWatchEncoder, StoreUnavailableError,
)
from orchd.storage.memory import MemoryStore
from orchd.storage.watchcache import CachedEvent, CacheWatcher, WatchCache
from tests.storage.things import PREFIX, StoreWrites, thing

@implementer(IWatchEncoder)
class RecordingEncoder:
    """Frames that say what the cache asked for, and a log of every call."""

    def __init__(self, key, calls):
        self.key = key
        self.calls = calls

    def event(self, type, obj):
        self.calls.append((self.key, type, obj["metadata"]["name"]))
        return f"{self.key}:{type}:{obj['metadata']['name']};".encode()

    def bookmark(self, revision, initial_events_end=False):
        self.calls.append((self.key, "BOOKMARK", revision, initial_events_end))
        return f"{self.key}:BOOKMARK:{revision}:{initial_events_end};".encode()

    def error(self, error):
        self.calls.append((self.key, "ERROR", error))
        return f"{self.key}:ERROR:{type(error).__name__};".encode()


class Sink:
    """What a watch response offers the cache: written bytes and how it ended."""

    def __init__(self):
        self.data = b""
        self.ended = None

    def write(self, data, frames=1):
        self.data += data

    def finish(self):
        self.ended = "finished"

    def drop(self, reason):
        self.ended = reason

    def frames(self):
        return [frame for frame in self.data.decode().split(";") if frame]


class WatchCacheEncoderTests(StoreWrites, SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.store = MemoryStore()
        self.cache = WatchCache(self.store, PREFIX, self.clock, history=3)
        self.addCleanup(self.cache.stop)
        self.calls = []

    def start_cache(self):
        self.successResultOf(Deferred.fromCoroutine(self.cache.start()))

    def watcher(self, key="fmt", after=None, bookmarks=False):
        sink = Sink()
        watcher = CacheWatcher(self.cache, PREFIX, lambda obj: True,
                               RecordingEncoder(key, self.calls), sink,
                               self.cache.revision if after is None else after, bookmarks)
        return watcher, sink

    def flush(self):
        self.clock.advance(watchcache.MAX_FLUSH_INTERVAL)

    def test_recording_encoder_is_an_encoder(self):
        """The fake encoder these tests use has the interface's shape."""
        self.assertTrue(verifyObject(IWatchEncoder, RecordingEncoder("k", [])))

    def test_change_encoded_once_per_format(self):
        """Watchers whose encoders share a key share one frame; another key encodes again."""
        self.start_cache()
        sinks = []
        for key in ("json", "json", "json", "protobuf"):
            watcher, sink = self.watcher(key)
            self.cache.add_watcher(watcher)
            sinks.append(sink)
        self.write("a", "red")
        self.write("a", "blue")
        self.successResultOf(self.store.delete(PREFIX + "a"))
        self.flush()
        # Watchers are kept in a set: formats are encoded in no fixed order.
        for key in ("json", "protobuf"):
            self.assertEqual([call for call in self.calls if call[0] == key],
                             [(key, ADDED, "a"), (key, MODIFIED, "a"), (key, DELETED, "a")])
        self.assertEqual(len(self.calls), 6)
        self.assertEqual(sinks[0].frames(), ["json:ADDED:a", "json:MODIFIED:a",
                                             "json:DELETED:a"])
        self.assertEqual(sinks[1].data, sinks[0].data)
        self.assertEqual(sinks[3].frames(), ["protobuf:ADDED:a", "protobuf:MODIFIED:a",
                                             "protobuf:DELETED:a"])

    def test_periodic_bookmark_from_the_encoder(self):
        """The periodic bookmark is the encoder's, at the cache's revision, for bookmark watchers."""
        self.start_cache()
        with_bookmarks, sink = self.watcher("b", bookmarks=True)
        without, quiet = self.watcher("q")
        self.cache.add_watcher(with_bookmarks)
        self.cache.add_watcher(without)
        written = self.write("a", "red")
        self.clock.advance(watchcache.BOOKMARK_INTERVAL)
        self.flush()
        self.assertEqual(sink.frames(), ["b:ADDED:a",
                                         f"b:BOOKMARK:{written.mod_revision}:False"])
        self.assertEqual(quiet.frames(), ["q:ADDED:a"])

    def test_initial_events_end_bookmark(self):
        """A streaming list's snapshot ends with the encoder's initial-events-end bookmark."""
        self.write("a", "red")
        self.write("b", "red")
        self.start_cache()
        watcher, sink = self.watcher(bookmarks=True)
        snapshot, revision = self.cache.snapshot()
        self.cache.add_watcher(watcher)
        watcher.send_initial(snapshot, revision, True)
        self.write("c", "red")
        self.flush()
        self.assertEqual(sink.frames(), ["fmt:ADDED:a", "fmt:ADDED:b",
                                         f"fmt:BOOKMARK:{revision}:True", "fmt:ADDED:c"])

    def test_timeout_bookmark(self):
        """send_bookmark asks the encoder for a bookmark at the latest revision given."""
        self.start_cache()
        watcher, sink = self.watcher(bookmarks=True)
        self.cache.add_watcher(watcher)
        written = self.write("a", "red")
        watcher.send_bookmark()
        watcher.flush()
        self.assertEqual(sink.frames()[-1], f"fmt:BOOKMARK:{written.mod_revision}:False")

    def test_expired_start_is_the_encoders_error(self):
        """A start older than the history ends with the encoder's frame of a CompactedError."""
        self.start_cache()
        first = self.write("a", "red")
        for colour in ("b", "c", "d", "e"):
            self.write("a", colour)
        self.assertFalse(self.cache.can_resume(first.mod_revision))
        watcher, sink = self.watcher(after=first.mod_revision)
        self.cache.expire(watcher, first.mod_revision)
        self.assertEqual(sink.frames(), ["fmt:ERROR:CompactedError"])
        self.assertEqual(sink.ended, "finished")
        (_, _, error), = self.calls
        self.assertEqual((error.requested, error.compacted),
                         (first.mod_revision, self.cache.oldest))
        self.assertEqual(self.cache.watchers, set())

    def test_lost_store_watch_ends_watchers_with_an_error(self):
        """When the cache loses the store, every watcher gets the encoder's ERROR and ends."""
        self.start_cache()
        watcher, sink = self.watcher()
        self.cache.add_watcher(watcher)
        self.write("a", "red")
        self.cache._subscription.stop()
        self.cache._failed(StoreUnavailableError("gone"))
        self.flushLoggedErrors()
        self.assertEqual(sink.frames(), ["fmt:ADDED:a", "fmt:ERROR:CompactedError"])
        self.assertEqual(sink.ended, "finished")
        self.assertIsInstance(self.calls[-1][2], CompactedError)


class CountingSink(Sink):
    """A sink that also counts its writes and the frames it was told of."""

    def __init__(self):
        super().__init__()
        self.writes = 0
        self.told = 0

    def write(self, data, frames=1):
        super().write(data, frames)
        self.writes += 1
        self.told += frames


def everything(obj):
    return True


def red_only(calls):
    """A selector of red things that counts its calls, with a key as reading.selector's."""

    def selected(obj):
        calls.append(obj["metadata"]["name"])
        return obj["colour"] == "red"

    selected.key = "colour=red"
    return selected


class WatchGroupTests(StoreWrites, SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.store = MemoryStore()
        self.cache = WatchCache(self.store, PREFIX, self.clock, history=100)
        self.addCleanup(self.cache.stop)
        self.calls = []
        self.successResultOf(Deferred.fromCoroutine(self.cache.start()))

    def watcher(self, selected=None, after=None, key="fmt", bookmarks=False):
        sink = CountingSink()
        watcher = CacheWatcher(self.cache, PREFIX, selected or everything,
                               RecordingEncoder(key, self.calls), sink,
                               self.cache.revision if after is None else after, bookmarks)
        self.cache.add_watcher(watcher)
        return watcher, sink

    def flush(self):
        self.clock.advance(watchcache.MAX_FLUSH_INTERVAL)

    def test_like_watchers_filter_each_change_once(self):
        """Watchers with equal selectors and format share one group: a change is filtered once."""
        selector_calls = []
        sinks = [self.watcher(red_only(selector_calls))[1] for _ in range(50)]
        self.write("a", "red")
        self.write("b", "blue")
        self.flush()
        self.assertEqual(len(self.cache.groups), 1)
        self.assertEqual(selector_calls, ["a", "b"])
        for sink in sinks:
            self.assertEqual(sink.frames(), ["fmt:ADDED:a"])

    def test_one_write_per_flush(self):
        """The changes between two flushes reach each watcher in one write, counted whole."""
        sinks = [self.watcher()[1] for _ in range(3)]
        for name in ("a", "b", "c"):
            self.write(name, "red")
        self.flush()
        for sink in sinks:
            self.assertEqual((sink.writes, sink.told), (1, 3))
            self.assertEqual(sink.frames(), ["fmt:ADDED:a", "fmt:ADDED:b", "fmt:ADDED:c"])

    def test_other_selectors_other_groups(self):
        """Watchers with other selectors or formats are in other groups and get their frames."""
        _, everything = self.watcher()
        _, red = self.watcher(red_only([]))
        _, other_format = self.watcher(key="pb")
        self.write("a", "blue")
        self.write("b", "red")
        self.flush()
        self.assertEqual(len(self.cache.groups), 3)
        self.assertEqual(everything.frames(), ["fmt:ADDED:a", "fmt:ADDED:b"])
        self.assertEqual(red.frames(), ["fmt:ADDED:b"])
        self.assertEqual(other_format.frames(), ["pb:ADDED:a", "pb:ADDED:b"])

    def test_start_past_the_cache_skips_changes_up_to_it(self):
        """A watcher starting past the cache's revision gets only the group's changes after it."""
        _, early = self.watcher()
        _, late = self.watcher(after=self.cache.revision + 2)
        for name in ("a", "b", "c", "d"):
            self.write(name, "red")
        self.flush()
        self.assertEqual(len(self.cache.groups), 1)
        self.assertEqual(early.frames(), ["fmt:ADDED:a", "fmt:ADDED:b", "fmt:ADDED:c",
                                          "fmt:ADDED:d"])
        self.assertEqual(late.frames(), ["fmt:ADDED:c", "fmt:ADDED:d"])

    def test_late_joiner_gets_history_then_the_group(self):
        """A watcher resuming from an older revision gets the history it missed, then changes."""
        first = self.write("a", "red")
        self.write("b", "red")
        _, sink = self.watcher(after=first.mod_revision)
        self.write("c", "red")
        self.flush()
        self.assertEqual(sink.frames(), ["fmt:ADDED:b", "fmt:ADDED:c"])

    def test_paused_watcher_keeps_its_place(self):
        """A paused watcher gets, once resumed, what it missed in order; the others go on."""
        paused, slow = self.watcher()
        _, fast = self.watcher()
        paused.pause()
        self.write("a", "red")
        self.flush()
        self.write("b", "red")
        self.flush()
        self.assertEqual(slow.frames(), [])
        self.assertEqual(fast.frames(), ["fmt:ADDED:a", "fmt:ADDED:b"])
        group, = self.cache.groups.values()
        self.assertEqual(len(group.frames), 2)      # held for the paused watcher
        paused.resume()
        self.assertEqual(slow.frames(), ["fmt:ADDED:a", "fmt:ADDED:b"])
        self.write("c", "red")
        self.flush()
        self.assertEqual(group.frames, [])          # every member has had them
        self.assertEqual(slow.frames()[-1], "fmt:ADDED:c")

    def test_stuck_watcher_dropped(self):
        """A paused watcher more than the bound behind is dropped; the others are not."""
        self.patch(watchcache, "MAX_QUEUED_BYTES", 30)
        stuck, dropped = self.watcher()
        _, reading = self.watcher()
        stuck.pause()
        for name in ("a", "b", "c"):
            self.write(name, "red")
            self.flush()
        self.assertEqual(dropped.ended, "the client is not reading its watch fast enough")
        self.assertTrue(stuck.stopped)
        self.assertIsNone(reading.ended)
        self.assertEqual(len(reading.frames()), 3)
        group, = self.cache.groups.values()
        self.assertEqual(len(group.members), 1)

    def test_bookmark_after_the_changes_before_it(self):
        """A bookmark queued before a flush comes after the changes logged before it."""
        watcher, sink = self.watcher(bookmarks=True)
        written = self.write("a", "red")
        watcher.send_bookmark()
        self.write("b", "red")
        self.flush()
        self.assertEqual(sink.frames(), ["fmt:ADDED:a",
                                         f"fmt:BOOKMARK:{written.mod_revision}:False",
                                         "fmt:ADDED:b"])

    def test_changes_during_initial_events_wait_behind_them(self):
        """Changes logged while a watcher's initial events are produced come after them."""
        self.write("a", "red")
        watcher, sink = self.watcher(bookmarks=True)
        snapshot, revision = self.cache.snapshot()
        watcher.send_initial(snapshot, revision, True)
        self.write("b", "red")
        watcher.send_bookmark()
        self.flush()
        self.assertEqual(sink.frames(), ["fmt:ADDED:a", f"fmt:BOOKMARK:{revision}:True",
                                         "fmt:ADDED:b",
                                         f"fmt:BOOKMARK:{self.cache.revision}:False"])

    def test_last_watcher_gone_removes_the_group(self):
        """A group goes with its last member; its log with it."""
        one, _ = self.watcher()
        two, _ = self.watcher()
        self.write("a", "red")
        one.stop()
        self.assertEqual(len(self.cache.groups), 1)
        two.stop()
        self.assertEqual(self.cache.groups, {})
        self.flush()
        self.assertEqual(self.cache.watchers, set())

    def turn(self):
        """Run the calls due now, but not those they schedule for now: one reactor turn."""
        for call in [c for c in self.clock.getDelayedCalls()
                     if c.getTime() <= self.clock.seconds()]:
            self.clock.calls.remove(call)
            call.called = 1
            call.func(*call.args, **call.kw)

    def test_large_round_spread_over_turns(self):
        """A round of more than FLUSH_SLICE writes stops, and goes on at the next turn."""
        self.patch(watchcache, "FLUSH_SLICE", 2)
        sinks = [self.watcher()[1] for _ in range(5)]
        self.write("a", "red")
        self.turn()
        self.assertEqual(sum(sink.writes for sink in sinks), 2)
        self.write("b", "red")          # logged in the middle of the round
        self.turn()
        self.assertEqual(sum(sink.writes for sink in sinks), 4)
        self.turn()
        self.assertEqual([sink.writes for sink in sinks].count(0), 0)
        self.flush()
        for sink in sinks:
            self.assertEqual(sink.frames(), ["fmt:ADDED:a", "fmt:ADDED:b"])
        group, = self.cache.groups.values()
        self.assertEqual(group.frames, [])


class HistoryMemoryTests(SynchronousTestCase):
    """History holds one copy of each state's bytes, however many changes refer to it."""

    def test_previous_and_removed_states_are_the_bytes_already_held(self):
        """An update's previous value and a deletion's value are the cached state's bytes."""
        cache = WatchCache(MemoryStore(), PREFIX, Clock())
        self.addCleanup(cache.stop)
        self.successResultOf(Deferred.fromCoroutine(cache.start()))
        key = PREFIX + "a"

        def copy(value):
            # A store reads its own copy of a value (LevelDB does).
            return bytes(bytearray(value))

        red, blue = thing("a", "red"), thing("a", "blue")
        cache._apply([Event(ADDED, key, red, 1, 1)])
        cache._apply([Event(MODIFIED, key, blue, 2, 1, copy(red))])
        added, modified = (CachedEvent(*entry) for entry in cache.history)
        self.assertIs(modified.prev_value, added.value)
        self.assertEqual(modified.prev["colour"], "red")
        cache._apply([Event(DELETED, key, copy(blue), 3, 1)])
        deleted = CachedEvent(*cache.history[-1])
        self.assertIs(deleted.value, modified.value)
        self.assertEqual(deleted.obj["colour"], "blue")
        # Bytes that differ from the cached state are kept as the store gave them.
        other = thing("b", "green")
        cache._apply([Event(ADDED, PREFIX + "b", other, 4, 4)])
        changed = copy(thing("b", "grey"))
        cache._apply([Event(MODIFIED, PREFIX + "b", thing("b", "pink"), 5, 4, changed)])
        self.assertIs(cache.history[-1][4], changed)
