# -*- test-case-name: tests.storage.test_leveldb -*-
"""
The durable L{IStore}: one LevelDB database through plyvel, with group commit.

Layout::

    c/<key>         the key's current record
    e/<revision>    the change logged at that revision (8 bytes big-endian,
                    so byte order is revision order)
    m/rev           the last committed revision
    m/compacted     the compaction horizon
    m/swept         how far the log below the horizon has been swept

A record is C{header(type, revision, create_revision, prev_mod_revision,
len(key)) + key + value}. A put writes the same bytes to C{c/<key>} and
C{e/<revision>}, so C{get} is one read and the log can replay and undo
writes on its own; a delete removes C{c/<key>} and logs the value it
removed. A write's records and C{m/rev} go in one WriteBatch.

Writes are decided on the reactor thread, against committed data plus an
overlay of the writes not yet durable, and take their revision at once.
One writer thread writes everything queued as a single synced batch, so a
lone client pays one sync per write while many concurrent writes share a
sync; their Deferreds fire, and watches see their events, when it returns.
A batch leaves for the writer at the end of the reactor turn its first
write was decided in, so the writes of requests that arrived together
share it. Reads see only committed data, and never wait for the writer.
"""

import os
import queue
import struct
import threading
from itertools import islice

import plyvel
from twisted.internet import defer
from twisted.logger import LogLevel
from twisted.python.failure import Failure
from zope.interface import implementer

from orchd.storage.interfaces import (
    ADDED,
    DELETED,
    MODIFIED,
    IStore,
    KeyValue,
    ListResult,
    StoreUnavailableError,
)
from orchd.storage.revisioned import (
    Change,
    RevisionedStore,
    change_event,
    garbage,
    old_states,
    read_page,
)

_HEADER = struct.Struct(">BQQQI")
_HEADER_SIZE = _HEADER.size
_REVISION = struct.Struct(">Q")
_CODES = {ADDED: 1, MODIFIED: 2, DELETED: 3}
_TYPES = {code: kind for kind, code in _CODES.items()}

_CURRENT = b"c/"
_EVENTS = b"e/"
_META_REVISION = b"m/rev"
_META_COMPACTED = b"m/compacted"
_META_SWEPT = b"m/swept"

#: A batch stops growing past this many bytes, to bound one sync's latency.
_BATCH_BYTES = 32 << 20
#: A replay turn stops past this many bytes, so large values cannot stall the reactor.
_REPLAY_BYTES = 8 << 20


def _event_key(revision):
    return _EVENTS + _REVISION.pack(revision)


def _encode(change):
    key = change.key.encode()
    header = _HEADER.pack(
        _CODES[change.type],
        change.revision,
        change.create_revision,
        change.prev_mod_revision,
        len(key),
    )
    return b"".join((header, key, change.value))


def _decode(raw):
    code, revision, create, prev, key_length = _HEADER.unpack_from(raw)
    end = _HEADER_SIZE + key_length
    return Change(revision, _TYPES[code], raw[_HEADER_SIZE:end].decode(), raw[end:], create, prev)


def _decode_kv(key, raw):
    _, revision, create, _, key_length = _HEADER.unpack_from(raw)
    return KeyValue(key, raw[_HEADER_SIZE + key_length :], create, revision)


def _decode_listed(current_key, raw):
    _, revision, create, _, key_length = _HEADER.unpack_from(raw)
    return KeyValue(current_key[2:].decode(), raw[_HEADER_SIZE + key_length :], create, revision)


def _key_of(raw):
    """The key bytes of a record, without copying its value."""
    return raw[_HEADER_SIZE : _HEADER_SIZE + _HEADER.unpack_from(raw)[4]]


def _read_revision(db, key):
    raw = db.get(key)
    return 0 if raw is None else _REVISION.unpack(raw)[0]


def _prefix_end(prefix):
    """The first byte string after every string that starts with C{prefix}."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1])


class _Writer:
    """
    One thread that runs jobs in the order given, each result handed back
    to the reactor thread with one C{callFromThread}.

    Lighter than a one-thread L{twisted.python.threadpool.ThreadPool},
    whose hand-off of every job (a team, a worker, a locked queue, a
    context) costs the reactor thread as much again as this one.

    On Linux the thread is scheduled as C{SCHED_BATCH}: its share of the
    CPU is the same, but waking it (a batch handed over) does not preempt
    the reactor thread, which would then only wait for the GIL the writer
    wants. The writer runs when the reactor thread waits or its time slice
    ends, with the writes of more requests in its next batch; a sync does
    not take longer, and a write is acknowledged only once it is done.
    """

    def __init__(self, reactor, name):
        self._reactor = reactor
        self._jobs = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call(self, function, *args):
        """A Deferred firing, on the reactor thread, with C{function(*args)} run by the writer."""
        done = defer.Deferred()
        self._jobs.put((done, function, args))
        return done

    def _run(self):
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        except (AttributeError, OSError):
            pass    # not Linux: the default policy
        jobs, deliver = self._jobs, self._reactor.callFromThread
        while True:
            job = jobs.get()
            if job is None:
                return
            done, function, args = job
            try:
                result = function(*args)
            except BaseException:
                deliver(done.errback, Failure())
            else:
                deliver(done.callback, result)

    def stop(self):
        """Let the jobs given so far finish, then end the thread (idempotent)."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join()


class _Pending:
    """A decided write waiting for its batch to be durable."""

    __slots__ = ("key", "record", "change", "event", "result", "deferred")

    def __init__(self, key, record, change, event, result):
        self.key = key
        self.record = record
        self.change = change
        self.event = event
        self.result = result
        self.deferred = defer.Deferred()


@implementer(IStore)
class LevelDBStore(RevisionedStore):
    """
    A durable revisioned store in the LevelDB database at C{path}.

    @param reactor: delivers the writer thread's results (default: the
        global reactor) and spreads long watch replays over several turns.
    @param replay_chunk: how many logged changes a replaying watch reads per turn.
    @param sweep_chunk: how many logged changes one compaction step visits;
        steps queue behind write batches, and a write waits at most one
        step (some milliseconds: a step holds the GIL while it walks).
    @ivar batches_written: how many synced batches the writer has written.
    """

    def __init__(self, path, reactor=None, cache_size=64 << 20, replay_chunk=1000,
                 sweep_chunk=1000):
        if reactor is None:
            from twisted.internet import reactor
        # Owner-only: the store holds every Secret. LevelDB's own files
        # follow the process umask (orchd.app.datadir.restrict_umask).
        os.makedirs(path, mode=0o700, exist_ok=True)
        self._db = plyvel.DB(
            os.fspath(path),
            create_if_missing=True,
            lru_cache_size=cache_size,
            # LevelDB merges each table it flushes, which spans the whole
            # store (random names, the log, the meta keys), into the levels
            # below in the end: fewer, larger flushes merge less per write
            # (about 40% less compaction CPU per create at 100k objects than
            # 16 MB). The memory is used only as written; a restart replays
            # at most this much of LevelDB's own log.
            write_buffer_size=64 << 20,
            # Creates look up keys that are absent; the filter spares a disk read.
            bloom_filter_bits=10,
        )
        super().__init__(
            _read_revision(self._db, _META_REVISION),
            _read_revision(self._db, _META_COMPACTED),
            clock=reactor,
            replay_chunk=replay_chunk,
        )
        self._reactor = reactor
        self._sweep_chunk_size = sweep_chunk
        self._swept = _read_revision(self._db, _META_SWEPT)
        # Every committed key, so that looking for a key that is absent (as
        # each create does) reads nothing: a LevelDB lookup, even through the
        # bloom filters, opens an iterator or charges the tables it searched.
        # About 100 bytes a key, read once at open.
        skip = len(_CURRENT)
        self._keys = {raw[skip:].decode() for raw in
                      self._db.iterator(prefix=_CURRENT, include_value=False)}
        self._overlay = {}
        self._queue = []
        self._flush_due = False
        self._writing = False
        self._idle_waiters = []
        self._sweeping = False
        self._sweep_waiters = []
        self._close_waiters = []
        self._path = path
        self.batches_written = 0
        #: Where each batch's write count is observed (a histogram child), if anywhere.
        self.batch_sizes = None
        # The reactor's own pool serves others; a dedicated single thread
        # keeps batches in revision order and never waits behind them.
        self._writer = _Writer(reactor, "orchd-leveldb-writer")
        self._shutdown_trigger = reactor.addSystemEventTrigger("during", "shutdown",
                                                               self._writer.stop)
        if self._swept < self.compacted_revision:
            # A crash interrupted a compaction: finish forgetting its garbage.
            self._compact().addErrback(lambda _: None)

    # Reads: committed data only, straight from LevelDB.

    def get(self, key):
        db = self._db
        if db is None:
            return self._unavailable()
        if key not in self._keys:
            return defer.succeed(None)
        try:
            raw = db.get(_CURRENT + key.encode())
            return defer.succeed(None if raw is None else _decode_kv(key, raw))
        except Exception:
            return defer.fail()

    def list(self, prefix, revision=0, start=None, limit=0, count_remaining=False):
        db = self._db
        if db is None:
            return self._unavailable()
        try:
            return self._list(db, prefix, revision, start, limit, count_remaining)
        except Exception:
            return defer.fail()

    def _list(self, db, prefix, revision, start, limit, count_remaining):
        # One snapshot, so the revision and the items agree.
        snapshot = db.snapshot()
        latest = _read_revision(snapshot, _META_REVISION)
        first = max(prefix, start) if start is not None else prefix
        overrides = {}
        if revision:
            error = self._check_revision(revision, latest)
            if error is not None:
                return defer.fail(error)
            if revision < latest:
                overrides = self._old_states(snapshot, prefix, first, revision, latest)
        low = _CURRENT + first.encode()
        high = _prefix_end(_CURRENT + prefix.encode())

        def scan(from_key, values):
            return snapshot.iterator(start=from_key or low, stop=high, include_value=values)

        items, more, remaining = read_page(scan, overrides, limit, count_remaining, _decode_listed)
        return defer.succeed(ListResult(items, revision or latest, more, remaining))

    def _old_states(self, snapshot, prefix, first, revision, latest):
        """The state at C{revision} of each listed key changed since, by current-record key."""
        prefix, first = prefix.encode(), first.encode()

        def later():
            for _, raw in snapshot.iterator(start=_event_key(revision + 1), stop=_event_key(latest + 1)):
                key = _key_of(raw)
                if key.startswith(prefix) and key >= first:
                    yield _decode(raw)

        def value_at(revision):
            return _decode(snapshot.get(_event_key(revision))).value

        states = old_states(later(), value_at)
        return {_CURRENT + key.encode(): state for key, state in states.items()}

    def count(self, prefix):
        db = self._db
        if db is None:
            return self._unavailable()
        try:
            low = _CURRENT + prefix.encode()
            keys = db.iterator(start=low, stop=_prefix_end(low), include_value=False)
            return defer.succeed(sum(1 for _ in keys))
        except Exception:
            return defer.fail()

    def _value_at(self, revision):
        return _decode(self._db.get(_event_key(revision))).value

    def _read_events(self, prefix, after, upto, limit):
        """Replay for L{WatchHub}: at most C{limit} changes or about C{_REPLAY_BYTES} per turn."""
        prefix = prefix.encode()
        events = []
        size = read = 0
        last = after
        changes = self._db.iterator(start=_event_key(after + 1), stop=_event_key(upto + 1))
        for log_key, raw in islice(changes, limit):
            last = _REVISION.unpack_from(log_key, 2)[0]
            if _key_of(raw).startswith(prefix):
                events.append(change_event(_decode(raw), self._value_at))
            size += len(raw)
            read += 1
            if size >= _REPLAY_BYTES:
                return events, last
        # Fewer than asked for: the log up to upto has been read.
        return events, (upto if read < limit else last)

    # Writes: decided here, made durable by the writer thread in batches.

    def _current(self, key):
        change = self._overlay.get(key)
        if change is not None:
            if change.type == DELETED:
                return None
            return KeyValue(key, change.value, change.create_revision, change.revision)
        if key not in self._keys:
            return None
        # Through an iterator, not get(): LevelDB charges a get that looks
        # in more than one table to the first, and merges a table charged
        # some hundred times into the next level, with every table of that
        # level it spans (each flushed table spans the store: current
        # records, log and meta), so compaction CPU per write grew with the
        # store. An iterator's reads are charged about once per MB read.
        # Closed at once: cheaper than leaving it to plyvel's finalizer.
        record_key = _CURRENT + key.encode()
        found = self._db.raw_iterator()
        try:
            found.seek(record_key)
            if found.valid() and found.key() == record_key:
                return _decode_kv(key, found.value())
            return None
        finally:
            found.close()

    def _commit(self, change, event, result):
        pending = _Pending(change.key, _encode(change), change, event, result)
        self._overlay[change.key] = change
        self._queue.append(pending)
        if not self._writing and not self._flush_due:
            # The requests read in this reactor turn may write too: their
            # writes join this one's batch.
            self._flush_due = True
            self._reactor.callLater(0, self._flush)
        return pending.deferred

    def _flush(self):
        """Hand everything queued to the writer thread, unless a batch is in flight."""
        self._flush_due = False
        if self._writing or not self._queue:
            return
        queue = self._queue
        size = count = 0
        for pending in queue:
            size += len(pending.record)
            count += 1
            if size >= _BATCH_BYTES:
                break
        writes = queue[:count]
        del queue[:count]
        self._writing = True
        written = self._writer.call(self._write_batch, writes)
        written.addCallbacks(self._written, self._write_failed, (writes,), None, (writes,))

    def _write_batch(self, writes):
        """In the writer thread: make C{writes} durable with one synced write."""
        batch = self._db.write_batch(sync=True)
        for pending in writes:
            change = pending.change
            if change.type == DELETED:
                batch.delete(_CURRENT + change.key.encode())
            else:
                batch.put(_CURRENT + change.key.encode(), pending.record)
            batch.put(_event_key(change.revision), pending.record)
        batch.put(_META_REVISION, _REVISION.pack(writes[-1].change.revision))
        batch.write()

    def _written(self, _, writes):
        self.batches_written += 1
        if self.batch_sizes is not None:
            self.batch_sizes.observe(len(writes))
        self._committed = committed = writes[-1].change.revision
        overlay, keys = self._overlay, self._keys
        for pending in writes:
            if pending.change.type == DELETED:
                keys.discard(pending.key)
            else:
                keys.add(pending.key)
            change = overlay.get(pending.key)
            if change is not None and change.revision <= committed:
                del overlay[pending.key]
        self._hub.publish([pending.event for pending in writes])
        for pending in writes:
            pending.deferred.callback(pending.result)
        # Still "writing" until here, so that the writes these callbacks
        # made join what queued meanwhile in one batch, not a batch of one.
        self._writing = False
        self._flush()
        self._notify_idle()

    def _write_failed(self, failure, writes):
        # Queued writes were decided against the failed ones: fail them too,
        # and start again from what is durable.
        failed = writes + self._queue
        self._queue = []
        self._overlay.clear()
        self._revision = self._committed
        self.log.failure(
            "Writing a batch of {count} writes failed; {failed} pending writes fail",
            failure,
            level=LogLevel.error,
            count=len(writes),
            failed=len(failed),
        )
        for pending in failed:
            error = StoreUnavailableError(f"the write could not be made durable: {failure.value}")
            error.__cause__ = failure.value
            pending.deferred.errback(error)
        self._writing = False
        self._flush()
        self._notify_idle()

    def _notify_idle(self):
        if self._writing or self._queue:
            return
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            waiter.callback(None)

    # Compaction: the horizon moves at once; the garbage goes in steps.

    def _compact(self):
        waiter = defer.Deferred()
        self._sweep_waiters.append(waiter)
        if not self._sweeping:
            self._sweeping = True
            defer.Deferred.fromCoroutine(self._sweep())
        return waiter

    async def _sweep(self):
        error = None
        try:
            while self._swept < self.compacted_revision and self._accepting:
                self._swept = await self._writer.call(
                    self._sweep_step, self._swept, self.compacted_revision
                )
        except Exception as exception:
            error = StoreUnavailableError(f"compaction failed: {exception}")
            self.log.failure("Compaction to {horizon} failed", horizon=self.compacted_revision)
        finally:
            self._sweeping = False
        if error is None and self._swept < self.compacted_revision:
            error = StoreUnavailableError("the store closed before compaction finished")
        waiters, self._sweep_waiters = self._sweep_waiters, []
        for waiter in waiters:
            if error is None:
                waiter.callback(None)
            else:
                waiter.errback(error)

    def _sweep_step(self, swept, horizon):
        """
        In the writer thread: forget the garbage of up to C{sweep_chunk}
        changes after C{swept}; return how far the sweep got.

        The horizon is written atomically with the first step's deletions,
        and progress with each step, so a crash loses a whole step or
        nothing and the sweep resumes at the next open. No sync is needed:
        a lost step takes its deletions with it, and the next synced write
        makes it durable anyway.
        """
        db = self._db
        batch = db.write_batch()
        visited = 0
        last = swept
        changes = db.iterator(start=_event_key(swept + 1), stop=_event_key(horizon + 1))
        for log_key, raw in islice(changes, self._sweep_chunk_size):
            code, revision, create, prev, _ = _HEADER.unpack_from(raw)
            for dropped in garbage(Change(revision, _TYPES[code], None, None, create, prev)):
                batch.delete(_event_key(dropped))
            visited += 1
            last = revision
        if visited < self._sweep_chunk_size:
            last = horizon
        batch.put(_META_SWEPT, _REVISION.pack(last))
        batch.put(_META_COMPACTED, _REVISION.pack(horizon))
        batch.write()
        return last

    # Life cycle.

    def check(self):
        db = self._db
        if db is None or not self._accepting:
            return self._unavailable()
        try:
            db.get(_META_REVISION)
        except plyvel.Error as error:
            return defer.fail(StoreUnavailableError(f"LevelDB cannot read: {error}"))
        return defer.succeed(None)

    def close(self):
        done = defer.Deferred()
        if self._db is None:
            done.callback(None)
            return done
        self._close_waiters.append(done)
        if len(self._close_waiters) == 1:
            defer.Deferred.fromCoroutine(self._shut_down())
        return done

    async def _shut_down(self):
        self._accepting = False
        error = None
        try:
            while self._writing or self._queue:
                waiter = defer.Deferred()
                self._idle_waiters.append(waiter)
                await waiter
            if self._sweeping:
                # The sweep stops after its current step; the next open resumes it.
                waiter = self._compact()
                waiter.addErrback(lambda _: None)
                await waiter
            self._hub.close(StoreUnavailableError("the store is closed"))
        except Exception as exception:
            error = exception
            self.log.failure("Closing the store at {path} failed", path=self._path)
        finally:
            self._reactor.removeSystemEventTrigger(self._shutdown_trigger)
            self._writer.stop()
            self._db.close()
            self._db = None
        waiters, self._close_waiters = self._close_waiters, []
        for waiter in waiters:
            if error is None:
                waiter.callback(None)
            else:
                waiter.errback(StoreUnavailableError(f"closing failed: {error}"))
